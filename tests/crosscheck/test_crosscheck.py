"""The crosscheck package without the CLI: the log formats, --source constants, and the recomputed figures."""

from pathlib import Path

import pytest

from nxgates import crosscheck as xc
from nxgates.errors import ConfigError
from nxgates.gatekit import RunContext
from tests.oracles.seed_logs import lora_log, parallel_grad_log

DATA = Path(__file__).parent.parent / "data"
LORA_NX = "nx_intfp_lora_gradcheck_gate.nx"
LORA_DEFAULTS = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def seed_text(name):
    """A verbatim copy of the seed program (tests/data/), so the suite does not need ../shared."""
    return (DATA / name).read_text()


def test_seed_default_lora_log_parses_into_its_figures():
    log = xc.parse_log(lora_log(), "lora")
    assert log.one("banner") == {"rank": 2}
    assert log.one("params") == {"frozen": 36, "trainable": 24, "permil": 400, "L_q32": 1329684529960}
    assert log.one("A") == {"passed": 12, "cells": 12, "worst": 2, "maxabs": 185888}
    assert log.one("B") == {"passed": 12, "cells": 12, "worst": 0, "maxabs": 367790}
    assert log.all("A cell") == [] and log.one("verdict") == {"word": "GREEN", "correct": 24, "cells": 24}


def test_failing_cell_lines_are_parsed_in_order():
    log = xc.parse_log(lora_log(TOLP=1), "lora")
    assert [c["cell"] for c in log.all("A cell")] == [2, 3]
    assert log.all("A cell")[0] == {"cell": 2, "ana": 20732, "num": 20196, "rel": 2}
    assert log.one("verdict")["word"] == "RED"


def test_negative_figures_parse():
    text = lora_log(T=2, DM=9, R=9, DELTA=1, TOLP=0)
    cells = xc.parse_log(text, "lora").all("A cell") + xc.parse_log(text, "lora").all("B cell")
    assert any(c["ana"] < 0 for c in cells)


@pytest.mark.parametrize("module, text", [
    ("lora", lora_log()),
    ("parallel_grad", parallel_grad_log(workers=16, ran=8, B=8, mism=0, chk=1191, NP=192)),
])
def test_every_truncation_is_refused(module, text):
    lines = text.splitlines(keepends=True)
    for n in range(len(lines)):
        with pytest.raises(xc.LogError, match="truncated"):
            xc.parse_log("".join(lines[:n]), module)
    with pytest.raises(xc.LogError, match="truncated: its last line has no newline"):
        xc.parse_log(text[:-5], module)


def test_the_other_gates_log_is_named():
    with pytest.raises(xc.LogError, match=r"line 1: expected the lora line .* \(this is a parallel-grad log\)"):
        xc.parse_log(parallel_grad_log(workers=2, ran=8, B=8, mism=0, chk=1191, NP=192), "lora")
    with pytest.raises(xc.LogError, match="expected the parallel-grad line"):
        xc.parse_log(lora_log(), "parallel_grad")


@pytest.mark.parametrize("edit, where", [
    (lambda t: t.replace(" gradcheck:\n", " grad check:\n"), "line 4: expected the lora line ' gradcheck:'"),
    (lambda t: t.replace("L_q32=1329684529960", "L_q32=1.3e12"), "line 3"),
    (lambda t: t.replace("L_q32=1329684529960", "L_q32=" + "9" * 40), "line 3"),
    (lambda t: t.replace("L_q32=1", "L_q32=\u0661"), "line 3"),  # an Arabic-Indic digit is not the seed's output
    (lambda t: t + "more text\n", "unexpected text after the verdict"),
    (lambda t: t.replace("\n\n LoRA", "\n LoRA"), "line 7"),
])
def test_a_log_in_another_format_says_which_line_was_expected(edit, where):
    with pytest.raises(xc.LogError, match=where.replace("(", r"\(").replace(")", r"\)")):
        xc.parse_log(edit(lora_log()), "lora")


def test_crlf_and_trailing_blank_lines_are_accepted():
    text = lora_log().replace("\n", "\r\n") + "\n\n"
    assert xc.parse_log(text, "lora").one("params")["L_q32"] == 1329684529960


# ---- --source ------------------------------------------------------------------------------------------


def test_source_constants_of_the_seed_programs():
    lora = seed_text(LORA_NX)
    assert xc.source_params(lora, "lora", "x.nx") == {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70}
    pg = seed_text("nx_ta_parallel_grad_gate.nx")
    assert xc.source_params(pg, "parallel_grad", "x.nx") == {"D": 8, "H": 16, "O": 4, "B": 8}


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("const DM: i64 = 6", "const DM: i64 = 2*3"), "DM is not an integer literal: '2*3'"),
    (lambda t: t.replace("const DM: i64 = 6", ""), "cannot read DM: no declaration"),
    (lambda t: t + "const DM: i64 = 7\n", "cannot read DM: 2 declarations"),
    (lambda t: t.replace("let TOLP: i64=70", "let TOLP: i64=seventy"), "TOLP is not an integer literal"),
    (lambda t: t.replace("let DELTA: i64=2097;", ""), "cannot read DELTA: no declaration"),
    (lambda t: t.replace("const S: i64 = 1048576", "const S: i64 = 65536"), "S=65536 but nxgates' kernels need"),
    (lambda t: "", "cannot read S"),
])
def test_unreadable_lora_constants(edit, message):
    text = seed_text(LORA_NX)
    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        xc.source_params(edit(text), "lora", "x.nx")


def test_a_commented_out_declaration_does_not_count():
    text = seed_text(LORA_NX).replace("const R: i64 = 2 //", "// const R: i64 = 5\nconst R: i64 = 2 //")
    assert xc.source_params(text, "lora", "x.nx")["R"] == 2


def test_inconsistent_parallel_grad_constants():
    text = "".join(f"const {k}: i64 = {v}\n" for k, v in
                   {"PG_D": 5, "PG_H": 16, "PG_O": 4, "PG_NW1": 128, "PG_NW2": 64, "PG_NP": 192, "PG_B": 8}.items())
    with pytest.raises(ConfigError, match="PG_NW1=128 but nxgates' kernels need PG_NW1=80"):
        xc.source_params(text, "parallel_grad", "x.nx")


# ---- the recomputation ---------------------------------------------------------------------------------


def figures(text, module, params):
    figures_of = xc.seed_log(module).figures
    return {f.name: f for f in figures_of(xc.parse_log(text, module), RunContext(params=dict(params)))}


def test_lora_figures_agree_on_the_seed_log_and_name_what_differs():
    figs = figures(lora_log(), "lora", LORA_DEFAULTS)
    assert all(f.agrees for f in figs.values())
    figs = figures(lora_log().replace("max|grad|=367790", "max|grad|=367791"), "lora", LORA_DEFAULTS)
    assert [(f.name, f.log, f.nxgates) for f in figs.values() if not f.agrees] == [
        ("B (lora) max|grad|", 367791, 367790)]


def test_a_failing_cell_outside_the_tensor_is_a_disagreement_not_a_crash():
    text = lora_log(TOLP=1).replace(" A (lora) cell 3 ", " A (lora) cell 99 ")
    bad = {f.name: f for f in figures(text, "lora", {**LORA_DEFAULTS, "tol_permil": 1}).values() if not f.agrees}
    assert bad["A (lora) cell 99 ana"].nxgates is None
    assert bad["A (lora) failing cells"].log == [2, 99]


def test_parallel_grad_t2_follows_the_nx_machines_worker_count():
    """A one-worker NX machine fails T2 in the seed; nxgates agrees with that log, and not with a PASS."""
    params = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 0, "executor": "thread"}
    one = parallel_grad_log(workers=1, ran=8, B=8, mism=0, chk=1191, NP=192)
    assert all(f.agrees for f in figures(one, "parallel_grad", params).values())
    lying = one.replace(" FAIL T2", " PASS T2")
    bad = [f.name for f in figures(lying, "parallel_grad", params).values() if not f.agrees]
    assert bad == ["T2 pool ran all B tasks on >1 worker"]


# ---- each gate declares its seed log; crosscheck finds it there ----------------------------------------


def test_crosscheck_finds_each_gates_declared_seed_log():
    from nxgates.gates import lora, parallel_grad

    assert xc.seed_log("lora") is lora.GATE.seed_log()
    assert [xc.seed_log(m).name for m in xc.known()] == ["lora", "parallel-grad"]
    assert xc.seed_log("dp_train") is None and xc.seed_log("no_such_gate") is None
    seed_checks = [spec.shows.removeprefix(" PASS ").removesuffix(" (or FAIL)")
                   for spec in xc.seed_log("parallel_grad").lines if spec.key.startswith("T")]
    assert seed_checks == list(parallel_grad.GATE.checks[:3])  # the gate's own check names, not copies


def test_a_gate_without_a_seed_log_is_a_usage_error():
    with pytest.raises(ConfigError, match="declares no seed log format"):
        xc.parse_log("x\n", "dp_train")


def test_importing_crosscheck_imports_no_gate():
    """crosscheck drives gates through their declarations, found when a crosscheck runs."""
    import subprocess
    import sys

    code = "import sys, nxgates.crosscheck; print(sorted(m for m in sys.modules if m.startswith('nxgates.gates.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
