"""A gate's parameters: integers in a range and named choices, as ``--set`` and gates.toml give them."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from nxgates.errors import ConfigError

ParamValue = int | str
_INT = r"[+-]?[0-9]{1,30}"  #: compiled on first use (re caches it): only --set values need it


# Start-up: every method a dataclass generates is compiled at import, ~0.1 ms apiece at every
# start of the command line. So the small immutable records are NamedTuples (immutable, with a repr and ==,
# at a fraction of the cost); the others are dataclasses without an __eq__ (nothing compares them by
# value) and, where they hold functions or a run's state, without a __repr__. GateDef stays a frozen
# dataclass: ``dataclasses.replace`` is how one is varied.
class IntParam(NamedTuple):
    """An integer parameter with an inclusive range; ``--set`` values must parse as base-10 integers."""

    doc: str
    min: int = 1
    max: int = 1 << 31
    default: int | None = None  #: a parameter added later has one, so a gates.toml written before it still loads

    kind = "int"

    def parse(self, key: str, text: str) -> int:
        text = text.strip()
        if not re.fullmatch(_INT, text):  # no floats, hex, underscores or other spellings int() would take
            if re.fullmatch(r"[+-]?[0-9]+", text, flags=re.ASCII):  # an integer, too long to be in range
                raise ConfigError(f"{key}={text[:40]}... ({len(text)} digits) is out of range [{self.min}, {self.max}]")
            raise ConfigError(f"{key} takes an integer, got {text!r}")
        return self.check(key, int(text, 10))

    def check(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} takes an integer, got {value!r}")
        if not self.min <= value <= self.max:
            raise ConfigError(f"{key}={value} is out of range [{self.min}, {self.max}]")
        return value

    def describe(self) -> str:
        return f"int in [{self.min}, {self.max}]"


class ChoiceParam(NamedTuple):
    """A string parameter restricted to named choices."""

    doc: str
    choices: tuple[str, ...]
    default: str | None = None  #: a parameter added later has one, so a gates.toml written before it still loads

    kind = "str"

    def parse(self, key: str, text: str) -> str:
        return self.check(key, text.strip())

    def check(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise ConfigError(f"{key} must be one of {', '.join(self.choices)}, got {value!r}")
        return value

    def describe(self) -> str:
        return "one of " + "|".join(self.choices)


Param = IntParam | ChoiceParam
