"""What a long loop of the core needs from whoever runs it: to say how far it got, and to stop at a deadline.

The core knows no gate: a gate's :class:`nxgates.gatekit.RunContext` has these three methods, and so does
:data:`UNPACED` for callers with neither a progress bar nor a deadline.
"""

from __future__ import annotations

from typing import Protocol


class Pacer(Protocol):
    def advance(self, n: int) -> None:
        """``n`` more units of work are done (a progress bar's ticks)."""

    def check_time(self) -> None:
        """Raise once the deadline has passed; called between units of work."""

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""


class _Unpaced:
    def advance(self, n: int) -> None:
        pass

    def check_time(self) -> None:
        pass

    def remaining(self) -> float | None:
        return None


#: no progress to show and no deadline to keep
UNPACED: Pacer = _Unpaced()
