"""How the seed ``nx_ta_parallel_grad_gate.nx`` prints its run, and every figure of it recomputed.

parallel-grad's declaration for ``nxgates crosscheck`` (:data:`SEED_LOG`): the seed prints the first three
of the gate's checks (:data:`.checks.CHECKS`), with its pool's counts and the gradients' bit-mismatches. nxgates
recomputes them by running the gate itself.
"""

from __future__ import annotations

import re

from nxgates.errors import ConfigError
from nxgates.gatekit import Figure, GateOutput, LineSpec, ParsedLog, RunContext, SeedLog, SourceConst
from nxgates.gates.parallel_grad.checks import CHECKS
from nxgates.gates.parallel_grad.gate import run

HEADER = ("nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the thread pool; "
          "per-example grads bit-identical to serial)")
GREEN = ("TA-PARALLEL-GRAD GREEN -- the f32 sovereign autograd trains DATA-PARALLEL on the thread pool, "
         "per-example gradients bit-identical to serial. Fast model training is unblocked (integrate into the "
         "reader trainer's batch loop).")
RED = "RED -- parallel training not correct (see mismatches)"

#: the checks the seed prints, by the key of their line ("T1" ...): the gate's first three
SEED_CHECKS = {name.split()[0]: name for name in CHECKS[:3]}

LINES = (
    LineSpec("header", re.escape(HEADER), HEADER),
    LineSpec("pool", r" workers=(?P<workers>{INT}) pool tasks completed=(?P<completed>{INT})/(?P<B>{INT})",
             " workers=N pool tasks completed=N/B"),
    LineSpec("bits", r" bit-mismatches=(?P<mismatches>{INT}) non-zero grad cells checked=(?P<checked>{INT})/"
                     r"(?P<cells>{INT})", " bit-mismatches=N non-zero grad cells checked=K/TOTAL"),
    *(LineSpec(key, rf" (?P<word>PASS|FAIL) {re.escape(name)}", f" PASS {name} (or FAIL)", words=("word",))
      for key, name in SEED_CHECKS.items()),
    LineSpec("passed", r"---- nx_ta_parallel_grad_gate: passed (?P<passed>{INT}) / (?P<total>{INT})",
             "---- nx_ta_parallel_grad_gate: passed N / M"),
    LineSpec("verdict", rf"(?P<word>{re.escape(GREEN)}|{re.escape(RED)})", f"{GREEN} (or {RED})",
             words=("word",)),
)

CONSTANTS = (SourceConst("PG_D", "D", "const"), SourceConst("PG_H", "H", "const"),
             SourceConst("PG_O", "O", "const"), SourceConst("PG_B", "B", "const"),
             SourceConst("PG_NW1", None, "const"), SourceConst("PG_NW2", None, "const"),
             SourceConst("PG_NP", None, "const"))


def derived(v: dict[str, int]) -> dict[str, int]:
    """The weight counts the seed declares, as the gate's layers have them."""
    return {"PG_NW1": v["PG_H"] * v["PG_D"], "PG_NW2": v["PG_O"] * v["PG_H"],
            "PG_NP": v["PG_H"] * v["PG_D"] + v["PG_O"] * v["PG_H"]}


def figures(log: ParsedLog, ctx: RunContext) -> list[Figure]:
    """Every figure of a parallel-grad log against nxgates' own run of the gate (serial gradients, pool).

    ``workers=`` is the NX machine's and is not compared. The seed decides T2 from its own figures
    (``ran == PG_B`` and ``nworkers > 1``), so the expected T2 is that decision on the log's ``completed=``
    and ``workers=``, and nxgates' own T2 besides (its pool must show the same). A pool of one worker (a
    one-worker cluster) cannot show parallelism: refused, as ``run`` refuses workers=1, not a disagreement.
    """
    out = run(ctx)
    m = out.metrics
    if m["workers"] < 2:
        raise ConfigError(f"the {m['executor']} pool has {m['workers']} worker: it cannot show parallelism "
                          "(T2 needs >1 worker); crosscheck parallel-grad on a pool of 2 or more")
    passed = {c.name: c.passed for c in out.checks}
    B = ctx.params["B"]
    n_params = m["total_cells"] // B
    pool, bits = log.one("pool"), log.one("bits")
    expect = {
        "T1": m["bit_mismatches"] == 0 and m["nonzero_cells"] > n_params,
        "T2": pool["completed"] == B and pool["workers"] > 1 and passed[SEED_CHECKS["T2"]],
        "T3": passed[SEED_CHECKS["T3"]],
    }
    figs = [
        Figure("pool tasks completed", pool["completed"], m["tasks_completed"]),
        Figure("pool tasks B", pool["B"], B),
        Figure("bit-mismatches", bits["mismatches"], m["bit_mismatches"]),
        Figure("non-zero grad cells checked", bits["checked"], m["nonzero_cells"]),
        Figure("grad cells total", bits["cells"], m["total_cells"]),
    ]
    for key, name in SEED_CHECKS.items():
        figs.append(Figure(name, log.one(key)["word"], "PASS" if expect[key] else "FAIL"))
    n_pass = sum(expect.values())
    figs += [
        Figure("passed", log.one("passed")["passed"], n_pass),
        Figure("checks", log.one("passed")["total"], len(SEED_CHECKS)),
        Figure("verdict", verdict(log), "GREEN" if n_pass == len(SEED_CHECKS) else "RED"),
    ]
    return figs


def verdict(log: ParsedLog) -> str:
    return "GREEN" if log.one("verdict")["word"] == GREEN else "RED"


def notes(log: ParsedLog, out: GateOutput) -> None:
    """The NX machine's worker count: reported, never compared (nxgates' pool is its own)."""
    workers = log.one("pool")["workers"]
    out.metrics["log_workers"] = workers
    out.info(f"workers={workers} (the NX machine's: reported, not compared)")


SEED_LOG = SeedLog(name="parallel-grad", lines=LINES, figures=figures, verdict=verdict, constants=CONSTANTS,
                   derived=derived, notes=notes)
