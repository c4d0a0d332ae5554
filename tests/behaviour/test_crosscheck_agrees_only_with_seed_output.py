"""Crosscheck agrees only with what a seed run can print. A figure is accepted only in the exact
form the seed's printer writes (no leading zero, no sign on zero, no ``+``, no stray Unicode whitespace, a
verdict line whose tail is its own verdict's), ``--source`` constants only as plain literals outside
comments, and a pool that cannot show parallelism is refused as ``run`` refuses it. The logs are the
seed's genuine output (``tests/oracles/seed_logs.py``), then mutated; the genuine logs, and logs no seed run
prints, go through the console script, and the many edits of one log through the same command in-process."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.behaviour.from_outside import Done, assert_one_line_error, needs_dask, nx
from tests.helpers import run_in_process
from tests.oracles.seed_logs import LORA_GREEN, LORA_RED, lora_log, parallel_grad_log

DATA = Path(__file__).parent.parent / "data"
LORA = lora_log()
LORA_FAILING_CELLS = lora_log(TOLP=0)  # the seed's RED log, with its failing-cell lines
PG = parallel_grad_log(workers=16, ran=8, B=8, mism=0, chk=1191, NP=192)  # the README's seed log


def cross(tmp_path: Path, gate: str, text: str, *args: str, env: dict | None = None) -> Done:
    """``nxgates crosscheck GATE run.log -q ARGS`` through the console script, ``run.log`` holding ``text``."""
    (tmp_path / "run.log").write_bytes(text.encode())
    return nx("crosscheck", gate, "run.log", "-q", *args, cwd=tmp_path, env=env)


def cross_here(tmp_path: Path, gate: str, text: str, *args: str):
    """The same crosscheck in-process: for the many edits of one log, whose process boundary adds nothing
    (the genuine logs, and a log no seed run prints, go through the console script above)."""
    (tmp_path / "run.log").write_bytes(text.encode())
    return run_in_process("crosscheck", gate, "run.log", "-q", *args, cwd=tmp_path)


def assert_not_accepted(r) -> None:
    assert r.returncode != 0 and "CROSSCHECK GREEN" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr


def test_the_genuine_seed_logs_agree(tmp_path):
    assert cross(tmp_path, "lora", LORA).returncode == 0
    assert cross(tmp_path, "lora", LORA_FAILING_CELLS, "--set", "tol_permil=0").returncode == 0
    assert cross(tmp_path, "parallel-grad", PG).returncode == 0


def one(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


VERDICT_TAIL_SWAP = LORA.replace(LORA_GREEN.format(tot=24, want=24), "GREEN 24/24 -- adapter Q-scaling bug\n")
NOT_EXACT = {
    "lora-leading-zero-L_q32": ("lora", one(LORA, "L_q32=1329684529960", "L_q32=0001329684529960"), []),
    "lora-leading-zero-rank": ("lora", one(LORA, "(rank 2)", "(rank 02)"), []),
    "lora-leading-zero-cells": ("lora", one(LORA, "A (lora): 12/12", "A (lora): 012/12"), []),
    "lora-leading-zero-cell-index": ("lora", one(LORA_FAILING_CELLS, "cell 2 ", "cell 02 "),
                                     ["--set", "tol_permil=0"]),
    "lora-minus-zero-worst": ("lora", one(LORA, "worst=0permil", "worst=-0permil"), []),
    "lora-plus-sign": ("lora", one(LORA, "L_q32=1329684529960", "L_q32=+1329684529960"), []),
    "lora-verdict-tail-of-the-other-verdict": ("lora", VERDICT_TAIL_SWAP, []),
    "lora-red-verdict-with-green-tail": (
        "lora", LORA_FAILING_CELLS.replace(LORA_RED.format(tot=18, want=24), LORA_GREEN.format(tot=18, want=24)
                                           .replace("GREEN", "RED")), ["--set", "tol_permil=0"]),
    "lora-trailing-nbsp": ("lora", one(LORA, "cells correct\n", "cells correct\u00a0\n"), []),
    "lora-trailing-em-space-on-a-figure": ("lora", one(LORA, "max|grad|=185888)\n", "max|grad|=185888)\u2003\n"),
                                           []),
    "pg-leading-zero-completed": ("parallel-grad", one(PG, "completed=8/8", "completed=08/008"), []),
    "pg-minus-zero-mismatches": ("parallel-grad", one(PG, "bit-mismatches=0", "bit-mismatches=-0"), []),
    "pg-leading-zero-checked": ("parallel-grad", one(PG, "checked=1191/1536", "checked=01191/1536"), []),
    "pg-thirty-digit-workers": ("parallel-grad", one(PG, "workers=16", "workers=" + "1" * 30), []),
    "pg-leading-zero-workers": ("parallel-grad", one(PG, "workers=16", "workers=016"), []),
    "pg-leading-zero-passed": ("parallel-grad", one(PG, "passed 3 / 3", "passed 03 / 3"), []),
    "pg-trailing-ideographic-space": ("parallel-grad", one(PG, "identical)\n", "identical)\u3000\n"), []),
}


@pytest.mark.parametrize("case", sorted(NOT_EXACT))
def test_a_figure_not_in_the_printers_exact_form_is_not_accepted(tmp_path, case):
    gate, text, args = NOT_EXACT[case]
    assert_not_accepted(cross_here(tmp_path, gate, text, *args))


# ---- --source: constants as plain literals, outside comments --------------------------------------------

SOURCE = (DATA / "nx_intfp_lora_gradcheck_gate.nx").read_text()
SOURCE_NOT_EXACT = {
    "leading-zero": one(SOURCE, "const T: i64 = 3\n", "const T: i64 = 03\n"),
    "only-in-a-block-comment": one(SOURCE, "const T: i64 = 3\n", "/* const T: i64 = 3 */\n"),
    "only-in-a-multiline-block-comment": one(SOURCE, "const T: i64 = 3\n", "/*\nconst T: i64 = 3\n*/\n"),
    "plus-sign": one(SOURCE, "const T: i64 = 3\n", "const T: i64 = +3\n"),
}


@pytest.mark.parametrize("case", sorted(SOURCE_NOT_EXACT))
def test_a_source_constant_not_a_plain_literal_is_refused(tmp_path, case):
    (tmp_path / "gate.nx").write_text(SOURCE_NOT_EXACT[case])
    r = cross_here(tmp_path, "lora", LORA, "--source", "gate.nx")
    assert_one_line_error(r)


# ---- hypothesis: one non-canonical edit of any figure ----------------------------------------------------

FIGURE = re.compile(r"(?<![A-Za-z_0-9])\d+")  # a printed number, not part of a name such as L_q32 or Q20
UNICODE_SPACES = ["\u00a0", "\u2003", "\u2009", "\u3000", "\u202f", "\u205f", "\u1680", "\x0b", "\x0c", "\x85"]
LOGS = {"lora": LORA, "parallel-grad": PG}


@st.composite
def non_canonical_edit(draw):
    gate = draw(st.sampled_from(sorted(LOGS)))
    text = LOGS[gate]
    figures = list(FIGURE.finditer(text))
    m = draw(st.sampled_from(figures))
    kinds = ["leading-zero", "plus", "space-before", "space-after"] + (["minus-zero"] if m.group() == "0" else [])
    kind = draw(st.sampled_from(kinds))
    space = draw(st.sampled_from(UNICODE_SPACES))
    start, end = m.span()
    edit = {"leading-zero": (start, "0"), "plus": (start, "+"), "minus-zero": (start, "-"),
            "space-before": (start, space), "space-after": (end, space)}[kind]
    at, insert = edit
    return gate, text[:at] + insert + text[at:], f"{kind} {insert!r} at {m.group()!r} (offset {at})"


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edit=non_canonical_edit())
def test_no_non_canonical_edit_of_a_figure_is_accepted(tmp_path, edit):
    gate, text, what = edit
    r = cross_here(tmp_path, gate, text)
    assert r.returncode != 0 and "CROSSCHECK GREEN" not in r.stdout, what


# ---- a pool that cannot show parallelism ----------------------------------------------------------------

@pytest.fixture
def one_worker_scheduler(dask_scheduler):
    """The address of the session's Dask cluster of exactly one worker."""
    return dask_scheduler(1)


def pg_red_t2() -> str:
    """A log no seed run prints: workers=16, every task completed, yet T2 FAILed and the verdict RED."""
    text = one(PG, " PASS T2", " FAIL T2")
    text = one(text, "passed 3 / 3", "passed 2 / 3")
    return text.replace(text.splitlines()[-1], "RED -- parallel training not correct (see mismatches)")


@needs_dask
def test_an_impossible_red_log_is_not_green_on_a_one_worker_cluster(tmp_path, one_worker_scheduler):
    env = {**os.environ, "NXGATES_DASK_SCHEDULER": one_worker_scheduler}
    assert_not_accepted(cross(tmp_path, "parallel-grad", pg_red_t2(), "--set", "executor=dask", env=env))


@needs_dask
def test_a_one_worker_cluster_is_refused_not_a_disagreement(tmp_path, one_worker_scheduler):
    env = {**os.environ, "NXGATES_DASK_SCHEDULER": one_worker_scheduler}
    r = cross(tmp_path, "parallel-grad", PG, "--set", "executor=dask", env=env)
    assert_one_line_error(r, "parallelism")


def test_an_impossible_red_log_is_not_green_on_a_normal_pool(tmp_path):
    assert_not_accepted(cross(tmp_path, "parallel-grad", pg_red_t2()))

