"""How the seed ``nx_intfp_lora_gradcheck_gate.nx`` prints its run, and every figure of it recomputed.

Declared by the gate (``GATE.seed_log``) for ``nxgates crosscheck``: one :class:`LineSpec` per line the seed
prints, in order, the constants ``--source`` reads from the program, and :func:`figures`, which recomputes
each figure with core's model and this gate's gradcheck.
"""

from __future__ import annotations

import re

from nxgates.core.q20 import S
from nxgates.errors import ResourceError
from nxgates.gatekit import Figure, LineSpec, ParsedLog, RunContext, SeedLog, SourceConst

GREEN_TAIL = ("integer LoRA/PEFT PROVEN (frozen base + low-rank adapter grads), no float. modelwright LoRA "
              "axis: ABSENT->present.")
RED_TAIL = "adapter Q-scaling bug"


def _cell(name: str, key: str) -> LineSpec:
    return LineSpec(key, rf" {re.escape(name)} cell (?P<cell>{{INT}}) ana=(?P<ana>{{INT}}) num=(?P<num>{{INT}}) "
                         r"rel=(?P<rel>{INT})", f" {name} cell I ana=N num=N rel=N", repeat=True)


def _summary(name: str, key: str) -> LineSpec:
    return LineSpec(key, rf" {re.escape(name)}: (?P<passed>{{INT}})/(?P<cells>{{INT}}) \(worst=(?P<worst>{{INT}})"
                         r"permil of max\|grad\|=(?P<maxabs>{INT})\)",
                    f" {name}: P/N (worst=Wpermil of max|grad|=M)")


LINES = (
    LineSpec("banner", r"=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning \(rank (?P<rank>{INT})\) "
                       r"in Q20 INTEGER, no float ===",
             "=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank R) in Q20 INTEGER, no float ==="),
    LineSpec("blank", "", "(an empty line)"),
    LineSpec("params", r" params: base W frozen \((?P<frozen>{INT})\) \+ LoRA A,B trainable \((?P<trainable>{INT})\) "
                       r"= (?P<permil>{INT})permil of full trained \(PEFT\) L_q32=(?P<L_q32>{INT})",
             " params: base W frozen (N) + LoRA A,B trainable (N) = Npermil of full trained (PEFT) L_q32=N"),
    LineSpec("gradcheck", " gradcheck:", " gradcheck:"),
    _cell("A (lora)", "A cell"),
    _summary("A (lora)", "A"),
    _cell("B (lora)", "B cell"),
    _summary("B (lora)", "B"),
    LineSpec("blank", "", "(an empty line)"),
    LineSpec("total", r" LoRA gradcheck: (?P<correct>{INT})/(?P<cells>{INT}) cells correct",
             " LoRA gradcheck: N/M cells correct"),
    # each verdict with its own tail: the seed never prints GREEN with the RED tail, nor the reverse
    LineSpec("verdict", rf"NX-INTFP-LORA verdict=(?P<word>(?P<_green>GREEN)|RED) (?P<correct>{{INT}})/"
                        rf"(?P<cells>{{INT}}) -- (?(_green){re.escape(GREEN_TAIL)}|{re.escape(RED_TAIL)})",
             f"NX-INTFP-LORA verdict=GREEN N/M -- {GREEN_TAIL} (or RED N/M -- {RED_TAIL})",
             words=("word",)),
)

CONSTANTS = (SourceConst("S", None, "const"), SourceConst("T", "T", "const"), SourceConst("DM", "DM", "const"),
             SourceConst("R", "R", "const"), SourceConst("DELTA", "delta", "let"),
             SourceConst("TOLP", "tol_permil", "let"))


def figures(log: ParsedLog, ctx: RunContext) -> list[Figure]:
    """Every figure of a lora log against core's forward and backward and the gradcheck at ``ctx.params``."""
    import numpy as np

    from nxgates.core import lora, q20
    from nxgates.core.lora.gradcheck import gradcheck_adapter
    from nxgates.tensors.lora_spec import lora_model

    p = ctx.params
    T, DM, R, delta, tol = p["T"], p["DM"], p["R"], p["delta"], p["tol_permil"]
    try:
        given = ctx.options.get("inputs")
        m = lora.init_model(T, DM, R) if given is None else lora_model(given)
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


SEED_LOG = SeedLog(
    name="lora",
    lines=LINES,
    figures=figures,
    verdict=lambda log: log.one("verdict")["word"],
    constants=CONSTANTS,
    derived=lambda values: {"S": S},  # the Q20 scale every kernel divides by
)
