"""A gate's input tensors, for ``nxgates export`` and ``nxgates run --inputs``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from nxgates.gatekit.params import ParamValue

INPUT_DTYPES = {"q20": "int64", "float32": "float32"}


class InputArray(NamedTuple):
    """One named input tensor. ``axes`` gives its shape: each axis a parameter's name (the array's size
    along it sets that parameter, e.g. ``("B", "D")``) or a fixed length."""

    name: str
    dtype: str  #: a key of :data:`INPUT_DTYPES`
    axes: tuple[str | int, ...]
    doc: str = ""

    def shape(self, params: dict[str, ParamValue]) -> tuple[int, ...]:
        """The shape the parameters give (a raw ``NAME.bin`` is read in it)."""
        return tuple(int(params[a]) if isinstance(a, str) else a for a in self.axes)


class InputSpec(NamedTuple):
    """The arrays a gate computes from. ``make`` gives them at given parameters (what ``nxgates export``
    writes); ``admit`` refuses values the gate's arithmetic cannot take (raises :class:`ConfigError` naming
    the array), beyond the dtype, shape and finiteness checks every input gets."""

    arrays: tuple[InputArray, ...]
    make: Callable[[dict[str, ParamValue]], dict[str, Any]]
    admit: Callable[[dict[str, Any], dict[str, ParamValue]], None] = lambda arrays, params: None

    @property
    def sizes(self) -> tuple[str, ...]:
        """The parameters the arrays' shapes determine, in order of first appearance."""
        return tuple(dict.fromkeys(a for arr in self.arrays for a in arr.axes if isinstance(a, str)))
