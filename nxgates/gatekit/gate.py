"""A gate module's declaration, :class:`GateDef`, with its faults and the selftest's variants."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import NamedTuple

from nxgates.gatekit.inputs import InputSpec
from nxgates.gatekit.output import GateOutput, RunContext
from nxgates.gatekit.params import Param, ParamValue
from nxgates.gatekit.seedlog import SeedLog


class Fault(NamedTuple):
    """A named, deliberately planted defect; the gate must FAIL, at least through ``caught_by``."""

    doc: str
    caught_by: tuple[str, ...]


class Variant(NamedTuple):
    """Another configuration ``nxgates selftest`` runs a gate and each of its faults under (e.g. an executor).

    ``session`` is entered around those runs (e.g. one cluster they share, so the selftest stays cheap).
    """

    label: str
    params: dict[str, ParamValue]
    session: Callable[[], AbstractContextManager] = contextlib.nullcontext


@dataclass(frozen=True, eq=False, repr=False)
class GateDef:
    """A gate module's declaration. ``run`` must be deterministic for given params and fault.

    ``checks`` names every check ``run`` may record (``GateOutput.check``), in order; each fault's
    ``caught_by`` names checks from it; ``run`` plants ``ctx.fault`` when it is set and must then FAIL.
    """

    params: dict[str, Param]
    checks: tuple[str, ...]
    run: Callable[[RunContext], GateOutput]
    faults: dict[str, Fault] = field(default_factory=dict)
    #: cross-parameter validation and resource estimates; raises ConfigError / ResourceError
    validate: Callable[[dict[str, ParamValue]], None] = lambda params: None
    #: extra `run` options this gate understands (e.g. save_grads), beyond --set/--preset
    options: tuple[str, ...] = ()
    #: more configurations the selftest proves the gate under (computed when the selftest runs)
    selftest_variants: Callable[[], tuple[Variant, ...]] = lambda: ()
    #: the seed program's log format, for ``nxgates crosscheck``; a function, so a run never imports it
    seed_log: Callable[[], SeedLog] | None = None
    #: the tensors a run computes from, for ``nxgates export`` and ``nxgates run --inputs`` (a gate that
    #: declares them also lists "inputs" in ``options``, and reads them from ``ctx.options["inputs"]``)
    inputs: InputSpec | None = None
    #: why ``fault`` cannot change anything at these parameters (planting it there is a usage error, not a
    #: green run), or None where it can and a check must catch it
    fault_applies: Callable[[str, dict[str, ParamValue]], str | None] = lambda fault, params: None
    #: declared checks a run records only when an option asks for them (parallel-grad's T4 with
    #: ``--compare-grads``); every other declared check is recorded by every run that finishes
    optional_checks: tuple[str, ...] = ()
