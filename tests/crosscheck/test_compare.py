"""The crosscheck report: one check per figure, its detail, metrics and verdicts, and the timeout report."""

import time

import pytest

from nxgates import crosscheck as xc
from nxgates.crosscheck import compare
from nxgates.errors import GateTimeout
from nxgates.gatekit import Figure, ParsedLog, SeedLog
from tests.oracles.seed_logs import lora_log

LORA_DEFAULTS = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def fake_seed_log(figures, seen=None):
    """A declaration whose figures are given; ``seen`` collects the context each recomputation got."""

    def recompute(log, ctx):
        if seen is not None:
            seen.append(ctx)
        return figures(ctx) if callable(figures) else figures

    def notes(log, out):
        out.info("a note from the log")

    return SeedLog(name="fake", lines=(), figures=recompute, verdict=lambda log: "GREEN", notes=notes)


@pytest.fixture
def declare(monkeypatch):
    def _declare(seed_log):
        monkeypatch.setattr(compare, "declared", lambda module: seed_log)

    return _declare


# ---- _show: how a figure's value reads in a check's detail ----------------------------------------------


def test_a_missing_value_or_an_empty_list_shows_as_none():
    assert compare._show(None) == "(none)"
    assert compare._show([]) == "(none)"


def test_scalars_show_as_their_text():
    assert compare._show(0) == "0"
    assert compare._show(-17) == "-17"
    assert compare._show("GREEN") == "GREEN"


def test_a_list_of_up_to_16_shows_whole():
    assert compare._show([2, 3]) == "[2, 3]"
    assert compare._show(list(range(16))) == "[" + ", ".join(map(str, range(16))) + "]"


def test_a_longer_list_shows_its_first_16_and_its_length():
    first = ", ".join(map(str, range(16)))
    assert compare._show(list(range(17))) == f"[{first}, ... (17 in all)]"
    assert compare._show(list(range(40))) == f"[{first}, ... (40 in all)]"
    assert compare._show([5, 6, 7], most=2) == "[5, 6, ... (3 in all)]"


# ---- the report ----------------------------------------------------------------------------------------


def test_each_figure_is_a_check_whose_detail_shows_both_sides_when_they_differ(declare):
    declare(fake_seed_log([Figure("same", 7, 7), Figure("differs", [1, 2], [1]), Figure("missing", 4, None),
                           Figure("none logged", None, 0)]))
    report = xc.crosscheck("fake-gate", "lora", ParsedLog(), {"T": 3})
    assert [(c.name, c.passed, c.detail, c.seconds) for c in report.output.checks] == [
        ("same", True, "7", 0.0),
        ("differs", False, "log [1, 2], nxgates [1]", 0.0),
        ("missing", False, "log 4, nxgates (none)", 0.0),
        ("none logged", False, "log (none), nxgates 0", 0.0),
    ]
    assert report.output.metrics == {
        "log_verdict": "GREEN", "source": None, "figures": 4, "disagreements": 3,
        "log": {"same": 7, "differs": [1, 2], "missing": 4, "none logged": None},
        "nxgates": {"same": 7, "differs": [1], "missing": None, "none logged": 0},
    }
    assert report.output.red == "CROSSCHECK RED -- 3 of 4 figures of the fake-gate log disagree with nxgates"
    assert report.output.green == "CROSSCHECK GREEN -- nxgates agrees with all 4 figures of the fake-gate log"
    assert not report.passed and report.verdict == report.output.red
    assert [line.text for line in report.output.lines() if hasattr(line, "level")] == ["a note from the log"]


def test_the_report_names_the_gate_and_copies_its_params(declare):
    declare(fake_seed_log([Figure("same", 1, 1)]))
    params = {"T": 3, "DM": 6}
    t0 = time.perf_counter()
    report = xc.crosscheck("fake-gate", "lora", ParsedLog(), params, source="edited.nx")
    elapsed = time.perf_counter() - t0
    assert report.name == "fake-gate" and report.label == "fake-gate[T=3 DM=6]"
    assert report.params == params and report.params is not params
    assert report.error is None and report.error_kind is None and report.fault is None
    assert report.passed
    assert report.verdict == "CROSSCHECK GREEN -- nxgates agrees with all 1 figures of the fake-gate log"
    assert report.output.metrics["source"] == "edited.nx"
    assert report.output.metrics["disagreements"] == 0
    assert isinstance(report.seconds, float) and 0 <= report.seconds <= elapsed


def test_the_recomputation_gets_the_params_options_and_a_deadline(declare):
    seen = []
    declare(fake_seed_log([Figure("same", 1, 1)], seen))
    params, options = {"T": 3}, {"inputs": "tensors"}
    before = time.monotonic()
    xc.crosscheck("fake-gate", "lora", ParsedLog(), params, timeout=30.0, options=options)
    after = time.monotonic()
    ctx = seen[0]
    assert ctx.params == params and ctx.params is not params
    assert ctx.options == options and ctx.options is not options
    assert before + 30.0 <= ctx.deadline <= after + 30.0
    xc.crosscheck("fake-gate", "lora", ParsedLog(), params)
    assert seen[1].deadline is None and seen[1].options == {}


def test_a_timeout_is_a_failed_timeout_check_and_a_timeout_error(declare):
    def too_slow(ctx):
        raise GateTimeout("timed out")

    declare(fake_seed_log(too_slow))
    params = {"T": 3}
    t0 = time.perf_counter()
    report = xc.crosscheck("fake-gate", "lora", ParsedLog(), params, timeout=2.5, source="s.nx")
    elapsed = time.perf_counter() - t0
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [
        ("timeout", False, "timed out after 2.5 s")]
    assert report.output.non_boolean_checks == {}  # the check's verdict is a real boolean
    assert report.name == "fake-gate" and report.params == params and report.params is not params
    assert report.fault is None
    assert report.error == "timed out after 2.5 s" and report.error_kind == "timeout"
    assert report.verdict == "fake-gate: RED -- timed out after 2.5 s"
    assert report.output.metrics == {"log_verdict": "GREEN", "source": "s.nx"}
    assert isinstance(report.seconds, float) and 0 <= report.seconds <= elapsed


def test_the_seed_lora_log_agrees_in_process():
    report = xc.crosscheck("lora", "lora", xc.parse_log(lora_log(), "lora"), LORA_DEFAULTS)
    assert report.passed and report.output.metrics["figures"] == 20
    checks = {c.name: c.detail for c in report.output.checks}
    assert checks["L_q32"] == "1329684529960" and checks["verdict"] == "GREEN"
    assert checks["A (lora) failing cells"] == "(none)"


def test_a_changed_figure_of_the_lora_log_disagrees_in_process():
    text = lora_log().replace("max|grad|=367790", "max|grad|=367791")
    report = xc.crosscheck("lora", "lora", xc.parse_log(text, "lora"), LORA_DEFAULTS)
    assert [(c.name, c.detail) for c in report.output.checks if not c.passed] == [
        ("B (lora) max|grad|", "log 367791, nxgates 367790")]
    assert report.verdict == "CROSSCHECK RED -- 1 of 20 figures of the lora log disagree with nxgates"
