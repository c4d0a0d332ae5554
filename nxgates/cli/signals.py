"""Stop signals: SIGTERM and SIGHUP stop a run as Ctrl-C does, none is lost in a finalizer, and none can
interrupt the writing of a report."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from nxgates.errors import Terminated

STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _on_terminate(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def redeliver_lost_stop(unraisable: Any) -> None:
    """``sys.unraisablehook``: a stop signal's exception (Ctrl-C, SIGTERM, SIGHUP) that was raised inside a
    weakref callback or a ``__del__``, where Python only prints it and carries on, so the run would go on as
    if never stopped. Trip the same signal again a moment later, from a timer thread (tripped from here, the
    handler would raise inside this hook, where it is lost for good): the handler raises in ordinary code
    this time, or lands here again and is re-tripped again. Nothing is printed."""
    exc = unraisable.exc_value
    if not isinstance(exc, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    import _thread
    import signal
    import threading

    retrip = threading.Timer(0.01, _thread.interrupt_main,
                             args=(exc.signum if isinstance(exc, Terminated) else signal.SIGINT,))
    retrip.daemon = True
    retrip.start()


def install_stop_handlers() -> None:
    """SIGTERM and SIGHUP stop a run as Ctrl-C does (unless ignored by nohup), and no stop signal is lost in
    a finalizer."""
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) != signal.SIG_IGN:  # nohup stays
            signal.signal(getattr(signal, name), _on_terminate)
    sys.unraisablehook = redeliver_lost_stop


def ignore_stop_signals() -> None:
    """From now on Ctrl-C, SIGTERM and SIGHUP do nothing: the verdict is decided, a signal must not turn it
    into a crash."""
    import signal

    for name in STOP_SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ignore Ctrl-C, SIGTERM and SIGHUP for a moment (writing the reports); a no-op off the main thread."""
    import signal
    import threading

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for name in STOP_SIGNALS:
            if hasattr(signal, name):
                saved[name] = signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        yield
    finally:
        for name, handler in saved.items():
            signal.signal(getattr(signal, name), handler)
