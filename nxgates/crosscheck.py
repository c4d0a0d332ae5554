"""``nxgates crosscheck GATE LOG``: read what a seed program printed and recompute every figure of it.

nxgates exists to be a second, independent implementation. A crosscheck parses the stdout of a real NX
run, line by line against the seed's exact print format (:data:`LOG_FORMATS`, declarative: one
:class:`LineSpec` per line the seed prints), recomputes each figure with nxgates' own gate code at the
run's sizes, and compares them integer by integer. The result is a :class:`~nxgates.runner.GateReport`
with one check per figure, so the JSON and JUnit reports of ``run`` apply unchanged.

Exit codes: 0 every figure agrees (whatever the log's own verdict: a RED run that nxgates also computes
RED agrees), 1 a figure disagrees, 2 the log is not a complete run of that gate in the seed's format, or
``--source`` constants cannot be read.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nxgates.errors import ConfigError, GateTimeout, ResourceError
from nxgates.gatekit import GateOutput, ParamValue, RunContext
from nxgates.runner import GateReport

SOURCE_LIMIT = 1 << 20  #: a seed program is a few KiB
_INT = r"-?[0-9]{1,30}"  # what the seed's wn()/pg_pn() print; ASCII digits only, bounded length


# ---- the log formats: one LineSpec per line the seed prints, in order ------------------------------------


@dataclass(frozen=True)
class LineSpec:
    """One line the seed prints. ``pattern`` must match the whole line; its named groups are figures
    (integers unless listed in ``words``). ``repeat`` lines occur zero or more times (failing cells)."""

    key: str
    pattern: str
    shows: str  #: the line as the seed prints it, for "expected ..." messages
    repeat: bool = False
    words: tuple[str, ...] = ()

    def match(self, line: str) -> dict[str, Any] | None:
        m = re.fullmatch(self.pattern.replace("{INT}", _INT), line)
        if m is None:
            return None
        return {k: (v if k in self.words or v is None else int(v)) for k, v in m.groupdict().items()}


LORA_GREEN_TAIL = ("integer LoRA/PEFT PROVEN (frozen base + low-rank adapter grads), no float. modelwright LoRA "
                   "axis: ABSENT->present.")
LORA_RED_TAIL = "adapter Q-scaling bug"


def _lora_cell(name: str, key: str) -> LineSpec:
    return LineSpec(key, rf" {re.escape(name)} cell (?P<cell>{{INT}}) ana=(?P<ana>{{INT}}) num=(?P<num>{{INT}}) "
                         r"rel=(?P<rel>{INT})", f" {name} cell I ana=N num=N rel=N", repeat=True)


def _lora_summary(name: str, key: str) -> LineSpec:
    return LineSpec(key, rf" {re.escape(name)}: (?P<passed>{{INT}})/(?P<cells>{{INT}}) \(worst=(?P<worst>{{INT}})"
                         r"permil of max\|grad\|=(?P<maxabs>{INT})\)",
                    f" {name}: P/N (worst=Wpermil of max|grad|=M)")


LORA_LOG = (
    LineSpec("banner", r"=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning \(rank (?P<rank>{INT})\) "
                       r"in Q20 INTEGER, no float ===",
             "=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank R) in Q20 INTEGER, no float ==="),
    LineSpec("blank", "", "(an empty line)"),
    LineSpec("params", r" params: base W frozen \((?P<frozen>{INT})\) \+ LoRA A,B trainable \((?P<trainable>{INT})\) "
                       r"= (?P<permil>{INT})permil of full trained \(PEFT\) L_q32=(?P<L_q32>{INT})",
             " params: base W frozen (N) + LoRA A,B trainable (N) = Npermil of full trained (PEFT) L_q32=N"),
    LineSpec("gradcheck", " gradcheck:", " gradcheck:"),
    _lora_cell("A (lora)", "A cell"),
    _lora_summary("A (lora)", "A"),
    _lora_cell("B (lora)", "B cell"),
    _lora_summary("B (lora)", "B"),
    LineSpec("blank", "", "(an empty line)"),
    LineSpec("total", r" LoRA gradcheck: (?P<correct>{INT})/(?P<cells>{INT}) cells correct",
             " LoRA gradcheck: N/M cells correct"),
    LineSpec("verdict", rf"NX-INTFP-LORA verdict=(?P<word>GREEN|RED) (?P<correct>{{INT}})/(?P<cells>{{INT}}) -- "
                        rf"(?:{re.escape(LORA_GREEN_TAIL)}|{re.escape(LORA_RED_TAIL)})",
             f"NX-INTFP-LORA verdict=GREEN N/M -- {LORA_GREEN_TAIL} (or RED N/M -- {LORA_RED_TAIL})",
             words=("word",)),
)

PG_HEADER = ("nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the thread pool; "
             "per-example grads bit-identical to serial)")
PG_CHECKS = {
    "T1": "T1 parallel grads BIT-IDENTICAL to serial (all B examples)",
    "T2": "T2 pool ran all B tasks on >1 worker",
    "T3": "T3 deterministic (re-run parallel identical)",
}
PG_GREEN = ("TA-PARALLEL-GRAD GREEN -- the f32 sovereign autograd trains DATA-PARALLEL on the thread pool, "
            "per-example gradients bit-identical to serial. Fast model training is unblocked (integrate into the "
            "reader trainer's batch loop).")
PG_RED = "RED -- parallel training not correct (see mismatches)"

PARALLEL_GRAD_LOG = (
    LineSpec("header", re.escape(PG_HEADER), PG_HEADER),
    LineSpec("pool", r" workers=(?P<workers>{INT}) pool tasks completed=(?P<completed>{INT})/(?P<B>{INT})",
             " workers=N pool tasks completed=N/B"),
    LineSpec("bits", r" bit-mismatches=(?P<mismatches>{INT}) non-zero grad cells checked=(?P<checked>{INT})/"
                     r"(?P<cells>{INT})", " bit-mismatches=N non-zero grad cells checked=K/TOTAL"),
    *(LineSpec(t, rf" (?P<word>PASS|FAIL) {re.escape(name)}", f" PASS {name} (or FAIL)", words=("word",))
      for t, name in PG_CHECKS.items()),
    LineSpec("passed", r"---- nx_ta_parallel_grad_gate: passed (?P<passed>{INT}) / (?P<total>{INT})",
             "---- nx_ta_parallel_grad_gate: passed N / M"),
    LineSpec("verdict", rf"(?P<word>{re.escape(PG_GREEN)}|{re.escape(PG_RED)})", f"{PG_GREEN} (or {PG_RED})",
             words=("word",)),
)

#: the parsers by gate module (so a gates.toml entry built on the lora module crosschecks as lora)
LOG_FORMATS: dict[str, tuple[LineSpec, ...]] = {"lora": LORA_LOG, "parallel_grad": PARALLEL_GRAD_LOG}
GATE_OF_MODULE = {"lora": "lora", "parallel_grad": "parallel-grad"}


class LogError(ConfigError):
    """The log is not a complete run of the gate in the seed's format (exit 2)."""


@dataclass
class ParsedLog:
    """The figures of a log: for each line key, the records of the lines that matched it, in order."""

    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def one(self, key: str) -> dict[str, Any]:
        return self.records[key][0]

    def all(self, key: str) -> list[dict[str, Any]]:
        return self.records.get(key, [])


def parse_log(text: str, module: str, what: str = "log") -> ParsedLog:
    """Match ``text`` line by line against the module's format; anything else is a :class:`LogError`."""
    specs = LOG_FORMATS[module]
    gate = GATE_OF_MODULE[module]
    if text and not text.endswith("\n"):
        raise LogError(f"{what}: truncated: its last line has no newline ({_shown(text.splitlines()[-1])})")
    lines = [line.removesuffix("\r") for line in text.split("\n")[:-1]]
    parsed = ParsedLog()
    n = 0
    for spec in specs:
        while spec.repeat and n < len(lines) and (record := spec.match(lines[n])) is not None:
            parsed.records.setdefault(spec.key, []).append(record)
            n += 1
        if spec.repeat:
            continue
        if n >= len(lines):
            raise LogError(f"{what}: truncated: ends after line {n}, expected the {gate} line '{spec.shows}'")
        record = spec.match(lines[n])
        if record is None:
            hint = _other_gate(lines[n], module) if n == 0 else ""
            raise LogError(f"{what}: line {n + 1}: expected the {gate} line '{spec.shows}', got "
                           f"{_shown(lines[n])}{hint}")
        parsed.records.setdefault(spec.key, []).append(record)
        n += 1
    extra = [i for i in range(n, len(lines)) if lines[i].strip()]
    if extra:
        raise LogError(f"{what}: line {extra[0] + 1}: unexpected text after the verdict: {_shown(lines[extra[0]])}")
    return parsed


def _shown(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:77] + "...")


def _other_gate(line: str, module: str) -> str:
    for other, specs in LOG_FORMATS.items():
        if other != module and specs[0].match(line) is not None:
            return f" (this is a {GATE_OF_MODULE[other]} log)"
    return ""


# ---- --source: the sizes and constants of an edited seed program ---------------------------------------


@dataclass(frozen=True)
class SourceConst:
    """A constant the seed program declares, and the gate parameter it sets (None: only checked)."""

    name: str
    param: str | None
    form: str  #: "const" (``const NAME: i64 = 3``) or "let" (``let NAME: i64=2097;``, ``;`` or end of line)


SOURCE_CONSTS: dict[str, tuple[SourceConst, ...]] = {
    "lora": (SourceConst("S", None, "const"), SourceConst("T", "T", "const"), SourceConst("DM", "DM", "const"),
             SourceConst("R", "R", "const"), SourceConst("DELTA", "delta", "let"),
             SourceConst("TOLP", "tol_permil", "let")),
    "parallel_grad": (SourceConst("PG_D", "D", "const"), SourceConst("PG_H", "H", "const"),
                      SourceConst("PG_O", "O", "const"), SourceConst("PG_B", "B", "const"),
                      SourceConst("PG_NW1", None, "const"), SourceConst("PG_NW2", None, "const"),
                      SourceConst("PG_NP", None, "const")),
}


def read_source_constants(text: str, module: str, what: str) -> dict[str, int]:
    """Every constant of :data:`SOURCE_CONSTS` from the program text: each declared exactly once, as an
    integer literal. The derived ones (S, PG_NW1, ...) must be what nxgates' kernels assume."""
    text = re.sub(r"//[^\n]*", "", text)  # comments may mention a constant; only declarations count
    values: dict[str, int] = {}
    for const in SOURCE_CONSTS[module]:
        name = re.escape(const.name)
        if const.form == "const":
            decl = rf"^[ \t]*const[ \t]+{name}[ \t]*:[ \t]*i64[ \t]*=[ \t]*([^\n]*?)[ \t]*$"
            shown = f"const {const.name}: i64 = <integer>"
        else:
            decl = rf"\blet[ \t]+{name}[ \t]*:[ \t]*i64[ \t]*=[ \t]*([^;\n]*?)[ \t]*(?:;|$)"
            shown = f"let {const.name}: i64=<integer>"
        found = re.findall(decl, text, flags=re.MULTILINE)
        if len(found) != 1:
            how = "no declaration" if not found else f"{len(found)} declarations"
            raise ConfigError(f"--source {what}: cannot read {const.name}: {how} `{shown}`")
        if not re.fullmatch(_INT, found[0]):
            raise ConfigError(f"--source {what}: {const.name} is not an integer literal: {found[0]!r}")
        values[const.name] = int(found[0])
    _check_derived(values, module, what)
    return values


def _check_derived(v: dict[str, int], module: str, what: str) -> None:
    if module == "lora":
        expected = {"S": 1048576}
    else:
        expected = {"PG_NW1": v["PG_H"] * v["PG_D"], "PG_NW2": v["PG_O"] * v["PG_H"],
                    "PG_NP": v["PG_H"] * v["PG_D"] + v["PG_O"] * v["PG_H"]}
    for name, want in expected.items():
        if v[name] != want:
            raise ConfigError(f"--source {what}: {name}={v[name]} but nxgates' kernels need {name}={want}: "
                              "the program's constants are inconsistent")


def source_params(text: str, module: str, what: str) -> dict[str, int]:
    """The gate parameters the program's constants set (e.g. ``{"T": 3, "DM": 6, ...}``)."""
    values = read_source_constants(text, module, what)
    return {c.param: values[c.name] for c in SOURCE_CONSTS[module] if c.param is not None}


# ---- recomputing the figures ---------------------------------------------------------------------------


@dataclass
class Figure:
    """One figure of the log next to nxgates' value for it. ``None`` on the nxgates side: no such thing."""

    name: str
    log: Any
    nxgates: Any

    @property
    def agrees(self) -> bool:
        return self.log == self.nxgates


def _show(value: Any, most: int = 16) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        if not value:
            return "(none)"
        shown = ", ".join(map(str, value[:most]))
        return f"[{shown}, ... ({len(value)} in all)]" if len(value) > most else f"[{shown}]"
    return str(value)


def lora_figures(log: ParsedLog, ctx: RunContext) -> list[Figure]:
    """Every figure of a lora log against lora.py's forward, backward and gradcheck at ``ctx.params``."""
    import numpy as np

    from nxgates.core import lora, q20
    from nxgates.gates.lora.gradcheck import gradcheck_adapter

    p = ctx.params
    T, DM, R, delta, tol = p["T"], p["DM"], p["R"], p["delta"], p["tol_permil"]
    try:
        m = lora.init_model(T, DM, R)
        f = lora.forward(m)
        checks = gradcheck_adapter(m, f, lora.backward(m, f), delta, tol, ctx, p["algorithm"])
    except q20.Q20Overflow as exc:
        raise ResourceError(f"lora at T={T} DM={DM} R={R} delta={delta}: {exc}") from None
    trained = 2 * DM * R
    banner, params = log.one("banner"), log.one("params")
    figs = [
        Figure("rank", banner["rank"], R),
        Figure("base W frozen params", params["frozen"], DM * DM),
        Figure("LoRA A,B trainable params", params["trainable"], trained),
        Figure("PEFT permil", params["permil"], trained * 1000 // (DM * DM + trained)),
        Figure("L_q32", params["L_q32"], f.loss),
    ]
    for key, g in zip(("A", "B"), checks, strict=True):
        summary = log.one(key)
        cells = log.all(f"{key} cell")
        failing = [int(i) for i in np.flatnonzero(g.rel > tol)]
        figs += [
            Figure(f"{g.name} passed", summary["passed"], g.n_pass),
            Figure(f"{g.name} cells", summary["cells"], g.cells),
            Figure(f"{g.name} worst permil", summary["worst"], g.worst),
            Figure(f"{g.name} max|grad|", summary["maxabs"], g.maxabs),
            Figure(f"{g.name} failing cells", [c["cell"] for c in cells], failing),
        ]
        for c in cells[: g.cells]:  # more lines than cells: the failing-cells figure already disagrees
            i = c["cell"]
            ok = 0 <= i < g.cells
            for fig, values in (("ana", g.analytic), ("num", g.numeric), ("rel", g.rel)):
                figs.append(Figure(f"{g.name} cell {i} {fig}", c[fig], int(values[i]) if ok else None))
    n_ok = sum(g.n_pass for g in checks)
    total, verdict = log.one("total"), log.one("verdict")
    figs += [
        Figure("LoRA gradcheck correct", total["correct"], n_ok),
        Figure("LoRA gradcheck cells", total["cells"], trained),
        Figure("verdict", verdict["word"], "GREEN" if n_ok == trained else "RED"),
        Figure("verdict correct", verdict["correct"], n_ok),
        Figure("verdict cells", verdict["cells"], trained),
    ]
    return figs


def parallel_grad_figures(log: ParsedLog, ctx: RunContext) -> list[Figure]:
    """Every figure of a parallel-grad log against nxgates' own run of the gate (serial gradients, pool).

    ``workers=`` is the NX machine's and is not compared; the seed's T2 needs it (``nworkers > 1``), so
    nxgates' T2 expectation is its own T2 and the log's worker count above 1.
    """
    from nxgates.gates import parallel_grad as pg

    out = pg.run(ctx)
    m = out.metrics
    passed = {c.name: c.passed for c in out.checks}
    B = ctx.params["B"]
    n_params = m["total_cells"] // B
    pool, bits = log.one("pool"), log.one("bits")
    expect = {
        "T1": m["bit_mismatches"] == 0 and m["nonzero_cells"] > n_params,
        "T2": passed[pg.T2] and m["tasks_completed"] == B and pool["workers"] > 1,
        "T3": passed[pg.T3],
    }
    figs = [
        Figure("pool tasks completed", pool["completed"], m["tasks_completed"]),
        Figure("pool tasks B", pool["B"], B),
        Figure("bit-mismatches", bits["mismatches"], m["bit_mismatches"]),
        Figure("non-zero grad cells checked", bits["checked"], m["nonzero_cells"]),
        Figure("grad cells total", bits["cells"], m["total_cells"]),
    ]
    for key, name in PG_CHECKS.items():
        figs.append(Figure(name, log.one(key)["word"], "PASS" if expect[key] else "FAIL"))
    n_pass = sum(expect.values())
    figs += [
        Figure("passed", log.one("passed")["passed"], n_pass),
        Figure("checks", log.one("passed")["total"], len(PG_CHECKS)),
        Figure("verdict", "GREEN" if log.one("verdict")["word"] == PG_GREEN else "RED",
               "GREEN" if n_pass == len(PG_CHECKS) else "RED"),
    ]
    return figs


RECOMPUTE: dict[str, Callable[[ParsedLog, RunContext], list[Figure]]] = {
    "lora": lora_figures,
    "parallel_grad": parallel_grad_figures,
}


def log_verdict(log: ParsedLog, module: str) -> str:
    verdict = log.one("verdict")
    if module == "lora":
        return verdict["word"]
    return "GREEN" if verdict["word"] == PG_GREEN else "RED"


def crosscheck(name: str, module: str, log: ParsedLog, params: dict[str, ParamValue], *,
               timeout: float | None = None, source: str | None = None) -> GateReport:
    """Recompute the log's figures; a report with one check per figure (``error`` set on a timeout)."""
    ctx = RunContext(params=dict(params), deadline=None if timeout is None else time.monotonic() + timeout)
    start = time.perf_counter()
    out = GateOutput()
    out.metrics = {"log_verdict": log_verdict(log, module), "source": source}
    if module == "parallel_grad":
        workers = log.one("pool")["workers"]
        out.metrics["log_workers"] = workers
        out.info(f"workers={workers} (the NX machine's: reported, not compared)")
    try:
        figures = RECOMPUTE[module](log, ctx)
    except GateTimeout:
        seconds = time.perf_counter() - start
        out.check("timeout", False, f"timed out after {timeout:g} s")
        return GateReport(name, dict(params), out, seconds, None, f"timed out after {timeout:g} s", "timeout")
    seconds = time.perf_counter() - start
    for fig in figures:
        detail = _show(fig.log) if fig.agrees else f"log {_show(fig.log)}, nxgates {_show(fig.nxgates)}"
        out.check(fig.name, fig.agrees, detail, seconds=0.0)
    bad = sum(not f.agrees for f in figures)
    out.metrics.update({
        "figures": len(figures),
        "disagreements": bad,
        "log": {f.name: f.log for f in figures},
        "nxgates": {f.name: f.nxgates for f in figures},
    })
    out.green = f"CROSSCHECK GREEN -- nxgates agrees with all {len(figures)} figures of the {name} log"
    out.red = f"CROSSCHECK RED -- {bad} of {len(figures)} figures of the {name} log disagree with nxgates"
    return GateReport(name, dict(params), out, seconds)


def read_log(path: str) -> str:
    from nxgates.safeio import LOG_LIMIT, read_text

    return read_text(path, "log", LOG_LIMIT)


def read_source(path: str) -> str:
    from nxgates.safeio import read_text

    return read_text(path, "--source", SOURCE_LIMIT)


def describe_source(path: str | None) -> str:
    return "the seed's defaults" if path is None else f"--source {Path(path).name}"


def effective_params(entry: Any, preset: str | None, sets: tuple[str, ...], source: str | None
                     ) -> dict[str, ParamValue]:
    """The sizes to recompute at: defaults, ``--preset``, ``--set`` (validated as for ``run``), and the
    constants of ``--source``, which may not be set twice (``--set`` of one of them, or a preset, is an error)."""
    from nxgates import registry

    if source is None:
        return registry.effective_params([entry], preset, sets)[entry.name]
    if preset is not None:
        raise ConfigError(f"--preset {preset} and --source cannot be combined: the source sets the sizes")
    from_source = source_params(read_source(source), entry.module, source)
    for _gate, key, _raw in registry.parse_sets(sets):
        if key in from_source:
            raise ConfigError(f"--set {key}: conflicts with --source {source}, which declares it")
    params = registry.effective_params([entry], None, sets)[entry.name]
    gate = entry.gate
    try:
        for key, value in from_source.items():
            params[key] = gate.params[key].check(key, value)
        gate.validate(params)
    except ConfigError as exc:
        raise ConfigError(f"--source {source}: {exc}") from None
    return params
