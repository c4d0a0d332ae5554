"""What gates, aliases and presets may be called, and how a user-given name is echoed in an error."""

from __future__ import annotations

import re

SEED_PRESET = "seed"  #: the preset every gate has: its defaults, the seed program's sizes
ALL = "all"  #: `run all`: reserved, no gate or alias may be called this
BUILT_IN = "built-in"  #: the origin of a gate nxgates ships (a plugin gate's is its distribution)
NAME_SHOWN = 60  #: characters of a user-given name echoed in an error
NAME = re.compile(r"^[a-z][a-z0-9_-]*$")  #: gate, alias and preset names
MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")  #: a dotted module name


def shorten(name: str, limit: int = NAME_SHOWN) -> str:
    """A user-given name cut to ``limit`` characters for an error line (a 100 KB name stays one short line)."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
