"""A RED line that names what failed, for the built-in gates.

A gate's RED text blames its subject ("adapter Q-scaling bug", "parallel training not correct"). That is
right when one of the gate's own core checks failed, and wrong when only an added check did: a
``--compare-grads`` file that differs, or the ``baseline`` check, which the runner records after the gate's
``run`` has returned. So the text is chosen when the verdict is read, from the checks failing then.
"""

from __future__ import annotations

from collections.abc import Iterable

from nxgates.gatekit import GateOutput


class NamedRedOutput(GateOutput):
    """A :class:`GateOutput` whose ``red`` is the gate's own text while one of its ``core`` checks fails, and
    otherwise says what the core checks proved and names the checks that failed."""

    def __init__(self, core: Iterable[str]) -> None:
        self._core = frozenset(core)
        self._head, self._proven = "", ""
        super().__init__()

    def others_failed(self, head: str, proven: str) -> None:
        """The RED line when only checks outside the core fail: ``head -- proven; failed: NAMES``."""
        self._head, self._proven = head, proven

    @property
    def red(self) -> str:
        failing = [c.name for c in self.checks if not c.passed]
        if not self._head or not failing or any(name in self._core for name in failing):
            return self._red
        return f"{self._head} -- {self._proven}; failed: {'; '.join(failing)}"

    @red.setter
    def red(self, text: str) -> None:
        self._red = text
