"""The lora gate's seed-log declaration: its line specs, and every figure recomputed at the log's sizes."""

import pytest

from nxgates import crosscheck as xc
from nxgates.core.lora import gradcheck
from nxgates.errors import ResourceError
from nxgates.gatekit import LineSpec, RunContext
from nxgates.gates.lora import seedlog
from tests.oracles.seed_logs import lora_log

DEFAULTS = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def figures(text, **params):
    """The lora figures of ``text`` at the seed's defaults with ``params`` changed, as (name, log, nxgates)."""
    ctx = RunContext(params={**DEFAULTS, **params})
    return [tuple(f) for f in seedlog.figures(xc.parse_log(text, "lora"), ctx)]


def disagreements(text, **params):
    return [f for f in figures(text, **params) if f[1] != f[2]]


# ---- the line specs --------------------------------------------------------------------------------------


def test_a_cell_line_spec_repeats_and_reads_four_integers():
    spec = seedlog._cell("A (lora)", "A cell")
    assert (spec.key, spec.shows, spec.repeat, spec.words) == (
        "A cell", " A (lora) cell I ana=N num=N rel=N", True, ())
    assert spec.match(" A (lora) cell 3 ana=-5 num=7 rel=12") == {"cell": 3, "ana": -5, "num": 7, "rel": 12}
    assert spec.match(" A (lora) cell 3 ana=-5 num=7 rel=") is None
    assert spec.match(" Ax(lora) cell 3 ana=-5 num=7 rel=12") is None  # the name is literal text
    assert seedlog.LINES[4] == spec and seedlog.LINES[6] == seedlog._cell("B (lora)", "B cell")


def test_a_summary_line_spec_reads_four_integers_once():
    spec = seedlog._summary("B (lora)", "B")
    assert (spec.key, spec.shows, spec.repeat, spec.words) == (
        "B", " B (lora): P/N (worst=Wpermil of max|grad|=M)", False, ())
    assert spec.match(" B (lora): 12/12 (worst=0permil of max|grad|=367790)") == {
        "passed": 12, "cells": 12, "worst": 0, "maxabs": 367790}
    assert spec.match(" B (lora): 12/12 (worst=0permil of max|grad|=367790") is None
    assert spec.match(" B (lora): 12/12 (worst=0PERMIL OF MAX|GRAD|=367790)") is None
    assert spec.match(" B.(lora): 12/12 (worst=0permil of max|grad|=367790)") is None
    assert seedlog.LINES[5] == seedlog._summary("A (lora)", "A") and seedlog.LINES[7] == spec


def test_the_declared_lines_in_order():
    assert [(s.key, s.repeat) for s in seedlog.LINES] == [
        ("banner", False), ("blank", False), ("params", False), ("gradcheck", False), ("A cell", True),
        ("A", False), ("B cell", True), ("B", False), ("blank", False), ("total", False), ("verdict", False)]
    assert all(isinstance(s, LineSpec) for s in seedlog.LINES)


# ---- the figures -----------------------------------------------------------------------------------------


def test_every_figure_of_a_red_log_by_name():
    assert figures(lora_log(TOLP=1), tol_permil=1) == [
        ("rank", 2, 2),
        ("base W frozen params", 36, 36),
        ("LoRA A,B trainable params", 24, 24),
        ("PEFT permil", 400, 400),
        ("L_q32", 1329684529960, 1329684529960),
        ("A (lora) passed", 10, 10),
        ("A (lora) cells", 12, 12),
        ("A (lora) worst permil", 2, 2),
        ("A (lora) max|grad|", 185888, 185888),
        ("A (lora) failing cells", [2, 3], [2, 3]),
        ("A (lora) cell 2 ana", 20732, 20732),
        ("A (lora) cell 2 num", 20196, 20196),
        ("A (lora) cell 2 rel", 2, 2),
        ("A (lora) cell 3 ana", 115593, 115593),
        ("A (lora) cell 3 num", 115992, 115992),
        ("A (lora) cell 3 rel", 2, 2),
        ("B (lora) passed", 12, 12),
        ("B (lora) cells", 12, 12),
        ("B (lora) worst permil", 0, 0),
        ("B (lora) max|grad|", 367790, 367790),
        ("B (lora) failing cells", [], []),
        ("LoRA gradcheck correct", 22, 22),
        ("LoRA gradcheck cells", 24, 24),
        ("verdict", "RED", "RED"),
        ("verdict correct", 22, 22),
        ("verdict cells", 24, 24),
    ]


def test_a_green_verdict_where_every_cell_passes_and_red_otherwise():
    assert ("verdict", "GREEN", "GREEN") in figures(lora_log())
    text = lora_log().replace("verdict=GREEN 24/24", "verdict=GREEN 22/24")
    assert disagreements(text) == [("verdict correct", 22, 24)]
    red = lora_log(TOLP=1).replace("=RED 22/24 -- adapter Q-scaling bug", "=GREEN 22/24 -- " + seedlog.GREEN_TAIL)
    assert disagreements(red, tol_permil=1) == [("verdict", "GREEN", "RED")]


def test_the_peft_permil_truncates():
    """42 of 91 parameters trained: 461.5 permil, printed 461."""
    assert ("PEFT permil", 461, 461) in figures(lora_log(T=1, DM=7, R=3), T=1, DM=7, R=3)


def test_a_cell_at_the_tolerance_passes():
    """At tol_permil=2 the cells with rel=2 pass: no failing-cell lines, and none expected."""
    assert disagreements(lora_log(TOLP=2), tol_permil=2) == []
    assert ("A (lora) failing cells", [], []) in figures(lora_log(TOLP=2), tol_permil=2)


def test_the_first_and_last_cells_are_compared_and_one_past_them_is_missing():
    text = lora_log(TOLP=0)
    figs = figures(text, tol_permil=0)
    assert ("A (lora) cell 0 ana", -176297, -176297) in figs and ("A (lora) cell 11 rel", 1, 1) in figs
    assert disagreements(text, tol_permil=0) == []
    past = text.replace(" A (lora) cell 11 ", " A (lora) cell 12 ")
    assert disagreements(past, tol_permil=0) == [
        ("A (lora) failing cells", [0, 2, 3, 4, 6, 12], [0, 2, 3, 4, 6, 11]),
        ("A (lora) cell 12 ana", -142535, None), ("A (lora) cell 12 num", -142288, None),
        ("A (lora) cell 12 rel", 1, None)]


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
def test_the_gradcheck_runs_by_the_algorithm_asked_for(monkeypatch, algorithm):
    used = []
    real = gradcheck.adapter_diffs

    def spy(m, f, delta, ctx, how):
        used.append(how)
        return real(m, f, delta, ctx, how)

    monkeypatch.setattr(gradcheck, "adapter_diffs", spy)
    assert disagreements(lora_log(), algorithm=algorithm) == []
    assert used == [algorithm]


def test_an_overflow_is_a_resource_error_naming_the_sizes():
    with pytest.raises(ResourceError) as info:
        figures(lora_log(), delta=1 << 40)
    assert str(info.value) == ("lora at T=3 DM=6 R=2 delta=1099511627776: int64 overflow guard tripped in "
                               "L(+-delta) (|value| could reach 1.27e+23 >= 2^63 (less a margin))")
