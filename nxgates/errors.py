"""Errors that end a run with a one-line message and a documented exit code (never a traceback)."""

from __future__ import annotations

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  #: Ctrl-C (SIGINT): 128 + 2, as shells report it
EXIT_TERMINATED = 143  #: SIGTERM (kill, timeout, a CI runner cancelling the job): 128 + 15
EXIT_HANGUP = 129  #: SIGHUP (the terminal closed): 128 + 1


class NxError(Exception):
    """The user's input or configuration cannot be run: exit 2 with this message."""

    exit_code = EXIT_USAGE


class ConfigError(NxError):
    """gates.toml, a --set value, a preset or another option is wrong."""


class ResourceError(NxError):
    """The requested sizes would overflow int64 or need more memory than this machine has."""


class GateError(Exception):
    """What a gate was asked to check broke the gate's contract (a user's function raised or returned the
    wrong thing): that gate's error, exit 1, never a crash of nxgates."""


class GateTimeout(Exception):
    """A gate ran past its --timeout; the runner reports it as a failed gate (exit 1)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP), raised in the main thread so it stops a run exactly like Ctrl-C; the exit code
    is the shell's for that signal, 128 + its number (143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, signum: int = 15):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def what(self) -> str:
        import signal

        return f"terminated ({signal.Signals(self.signum).name})"


#: CPython's RuntimeError when the system refuses a thread (a tight ``ulimit -v``: each thread reserves its stack)
THREAD_REFUSED = "can't start new thread"


def refused_a_resource(exc: BaseException) -> bool:
    """``exc`` is this machine's limits talking (no thread, or no memory for one), not a bug in a gate."""
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and THREAD_REFUSED in str(exc))
