"""A plugin gate's ``run`` under a deadline it may ignore.

Built-in gates call ``ctx.check_time()`` between units of work; a plugin may never do so (a ``sleep``, a
busy loop, a blocking call). Its ``run`` therefore goes to a worker thread and the runner stops waiting at
the deadline: the gate is reported timed out and the next one runs. Python cannot stop a thread, so the
stuck one is left behind as a daemon thread, and the console script ends the process with ``os._exit``
once the reports are written (:data:`THREAD_PREFIX` is how it knows such threads).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from nxgates.errors import GateTimeout

THREAD_PREFIX = "nxgates-gate-"  #: the name of every thread a plugin's run goes to
_POLL = 0.1  #: seconds between looks at the thread: the main thread stays responsive to Ctrl-C and SIGTERM


def call_with_deadline(name: str, run: Callable[[], Any], deadline: float | None) -> Any:
    """``run()``'s result, or what it raised (``SystemExit`` included), raised here; :class:`GateTimeout`
    when ``deadline`` (a :func:`time.monotonic` instant) passes first."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = run()
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: carried to the runner, never lost in a thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"{THREAD_PREFIX}{name}", daemon=True)
    worker.start()
    while worker.is_alive():
        wait = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
        if wait <= 0:
            raise GateTimeout("timed out")
        worker.join(wait)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def abandoned_threads() -> list[threading.Thread]:
    """Plugin runs still going after their gate was reported (timed out, or the run was stopped)."""
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]
