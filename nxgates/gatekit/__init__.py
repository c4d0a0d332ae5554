"""The public API for writing a gate: what a gate module declares and what its run produces.

A gate is a module exposing ``GATE = GateDef(...)``: its parameters (:class:`IntParam`,
:class:`ChoiceParam`), the names of its checks, its planted faults (:class:`Fault`) and a ``run`` function
that gets a :class:`RunContext` and returns a :class:`GateOutput`. Built-in gates live under
``nxgates/gates/`` with their defaults in gates.toml; a gate from another package also declares its default
table ``TABLE`` and registers its module in the entry-point group ``nxgates.gates`` (see
:mod:`nxgates.plugins` and docs/plugins.md). The runner, the CLI and the reports see a
gate only through these types, so everything ``nxgates run`` offers works the same for every gate.

A gate reproducing a seed program may also declare how that program prints its run (:class:`SeedLog`), so
``nxgates crosscheck`` can read a real run's stdout and recompute every figure of it.

Stable for plugins: the names in ``__all__``; the others imported here (``Check``, ``Line``, ``Lines``,
``Progress``, ``Variant``, ``Param``, ``ParamValue``, ``INPUT_DTYPES``) are for nxgates itself.
``validate`` and ``run`` report bad parameters by raising :class:`ConfigError` (one line, exit 2).

The modules: ``params`` (parameters), ``output`` (the run's context and its report), ``gate`` (the
declaration), ``seedlog`` (a seed program's log format), ``inputs`` (the tensors a run computes from).
"""

from nxgates.errors import ConfigError
from nxgates.gatekit.gate import Fault, GateDef, Variant  # noqa: F401 (Variant: for nxgates itself)
from nxgates.gatekit.inputs import INPUT_DTYPES, InputArray, InputSpec  # noqa: F401
from nxgates.gatekit.output import Check, GateOutput, Line, Lines, Progress, RunContext  # noqa: F401
from nxgates.gatekit.params import ChoiceParam, IntParam, Param, ParamValue  # noqa: F401
from nxgates.gatekit.seedlog import Figure, LineSpec, ParsedLog, SeedLog, SourceConst

__all__ = ["ChoiceParam", "ConfigError", "Fault", "Figure", "GateDef", "GateOutput", "InputArray", "InputSpec",
           "IntParam", "LineSpec", "ParsedLog", "RunContext", "SeedLog", "SourceConst"]
