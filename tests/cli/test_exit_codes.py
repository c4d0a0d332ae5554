"""Hostile input: every mistake is one line on stderr and exit 2; bugs are exit 3; never a traceback."""

import dataclasses

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates.cli import cli
from nxgates.gates import lora
from tests.helpers import GOOD_TABLE


def run(tmp_path, *args, config=None):
    if config is not None:
        (tmp_path / "gates.toml").write_text(config)
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def assert_usage_error(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nxgates: error: "), r.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("config, fragments", [
    ("[gates.lora\nmodule = 1", ("gates.toml: invalid TOML", "line 1, column")),
    ("", ("no gates defined",)),
    ("[gates.lora]\nmodule = 'lora'\n", ("missing field 'description'",)),
    (GOOD_TABLE.replace("delta = 2097, ", ""), ("missing parameter 'delta'",)),
    (GOOD_TABLE.replace("T = 3", "T = 3.5"), ("T takes an integer, got 3.5",)),
    (GOOD_TABLE.replace("T = 3", "T = true"), ("T takes an integer",)),
    (GOOD_TABLE.replace("T = 3", "T = 99999999999999999999"), ("out of range",)),
    (GOOD_TABLE.replace('module = "lora"', 'module = "os"'), ("module 'os' is not a gate module",)),
    (GOOD_TABLE.replace('module = "lora"', 'module = "../../evil"'), ("is not a gate module",)),
    (GOOD_TABLE.replace("R = 2", "R = 9"), ("R=9 must not exceed DM=6",)),
    (GOOD_TABLE + "\n[gates.lora.presets]\nbig = 3\n", ("presets.big: must be a table",)),
    (GOOD_TABLE + "\nextra = 1\n", ("unknown field 'extra'",)),
    ("title = 'x'\n" + GOOD_TABLE, ("unknown top-level key 'title'",)),
])
def test_broken_config_files(tmp_path, config, fragments):
    assert_usage_error(run(tmp_path, "run", "lora", config=config), "gates.toml", *fragments)


@pytest.mark.parametrize("args, fragment", [
    (["run", "lora", "--set", "DM=-3"], "DM=-3 is out of range"),
    (["run", "lora", "--set", "DM=0x10"], "DM takes an integer, got '0x10'"),
    (["run", "lora", "--set", "DM=1_000"], "DM takes an integer"),
    (["run", "lora", "--set", "T=1048576", "--set", "DM=1048576"], "memory budget"),
    (["run", "lora", "--set", "delta=1099511627776"], "int64 overflow guard"),
    (["run", "parallel-grad", "--set", "D=100000", "--set", "H=100000"], "memory budget"),
    (["run", "ta-gradcheck", "--set", "D=65536", "--set", "H=65536"], "memory budget"),
    (["run", "parallel-grad", "--set", "workers=1"], "workers=1"),
    (["run", "lora", "--json", "no/such/dir/r.json"], "directory no/such/dir does not exist"),
    (["run", "lora", "--junit", "."], "is a directory"),
    (["run", "lora", "--json", "-", "--junit", "-"], "cannot both write to stdout"),
    (["run", "lora", "--repeat", "0"], "--repeat"),
    (["run", "lora", "--timeout", "0"], "--timeout"),
    (["run", "lora", "--timeout", "soon"], "--timeout"),
    (["run", "lora", "--config", "missing.toml"], "missing.toml: cannot read config"),
    (["run", "lora", "--config", "."], "is a directory"),
    (["run", "lora", "-q", "-v"], "cannot be combined"),
    (["run", "lora", "--set", "parallel-grad.B=3"], "not among the gates being run"),
    (["run", "ta-gradcheck", "--executor", "thread"], "unknown parameter for ta-gradcheck"),
    (["run", "lora", "--executor", "fork"], "executor must be one of auto, thread, process, dask"),
    (["run", "parallel-grad", "--executor", "spark"], "executor must be one of auto, thread, process, dask"),
    (["run", "ta-gradcheck", "--scheduler", "tcp://127.0.0.1:8786"], "--scheduler applies to none of: ta-gradcheck"),
    (["run", "lora", "--executor", "process", "--scheduler", "tcp://127.0.0.1:8786"],
     "a scheduler address applies to executor=dask, not executor=process"),
    (["run", "__import__('os')"], "unknown gate"),
    (["selftest", "nosuch"], "unknown gate"),
    (["frobnicate"], "No such command"),
])
def test_bad_arguments(tmp_path, args, fragment):
    assert_usage_error(run(tmp_path, *args), fragment)


def test_unreadable_compare_file_is_a_usage_error(tmp_path):
    (tmp_path / "g.npy").write_bytes(b"\x93NUMPY garbage")
    assert_usage_error(run(tmp_path, "run", "parallel-grad", "--compare-grads", "g.npy"), "not a readable .npy")
    assert_usage_error(run(tmp_path, "run", "parallel-grad", "--compare-grads", "."), "--compare-grads .")


def test_no_report_file_is_left_behind_by_a_usage_error(tmp_path):
    run(tmp_path, "run", "lora", "--set", "DM=0", "--json", "r.json")
    assert not (tmp_path / "r.json").exists()


def test_an_internal_error_is_exit_3_with_one_line(tmp_path, monkeypatch):
    """A bug in a gate (simulated by replacing its run) must not print a traceback without --debug."""

    def broken(ctx):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr("nxgates.gates.lora.GATE", dataclasses.replace(lora.GATE, run=broken))
    r = run(tmp_path, "run", "lora", "--junit", "out.xml")
    assert r.exit_code == 3
    assert "Traceback" not in r.output
    assert "internal error: ZeroDivisionError: simulated bug" in r.stdout
    assert r.stderr.splitlines() == ["nxgates: internal error in a gate (run with --debug for the traceback)"]
    assert "<error" in (tmp_path / "out.xml").read_text()
    r = run(tmp_path, "run", "lora", "--debug")
    assert r.exit_code == 3 and "Traceback" in r.stderr and "ZeroDivisionError" in r.stderr


KEYS = st.sampled_from(["T", "DM", "R", "delta", "tol_permil", "algorithm", "D", "H", "O", "B", "workers",
                        "executor", "step_exp", "lora.T", "nope", "", " ", "=", "lora.", ".T",
                        "steps", "lr_q", "lr_num", "lr_den", "d4_examples", "lora-train.DM"])
VALUES = st.one_of(
    st.integers(-3, 12).map(str),
    st.sampled_from(["0", "-1", "1.5", "1e3", "", " ", "fast", "naive", "thread", "process", "nan",
                     str(1 << 40), str(1 << 63), str(10**30), "٣"]),
    st.text(max_size=6),
)
SET_PAIRS = st.lists(st.tuples(KEYS, VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=4)
GATES = st.lists(st.sampled_from(["lora", "lora-gradcheck", "parallel-grad", "ta-gradcheck", "all", "nope",
                                  "LORA", "-", "lora-train", "dp-train"]), min_size=0, max_size=3)
EXTRA = st.lists(st.sampled_from(["-q", "-v", "--repeat", "2", "0", "--preset", "seed", "medium", "bogus",
                                  "--inject", "grad-bug", "drop-task", "--json", "-", "--junit", "--timeout",
                                  "30", "-1", "--executor", "thread", "--help"]), max_size=4)
CONFIGS = st.one_of(
    st.none(),
    st.sampled_from([GOOD_TABLE, "", "[gates]\n", "[gates.x]\nmodule='lora'\n", GOOD_TABLE.replace("3", "-3"),
                     "garbage ][", "[gates.lora]\nmodule = 'lora'\ndescription = 'd'\nparams = 3\n"]),
    st.text(max_size=40),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["run", "show", "list", "selftest"]), gates=GATES, sets=SET_PAIRS, extra=EXTRA,
       config=CONFIGS)
def test_random_command_lines_never_trace_back(tmp_path, command, gates, sets, extra, config):
    cfg = tmp_path / "gates.toml"
    if config is None:
        cfg.unlink(missing_ok=True)
    else:
        cfg.write_text(config)
    args = [command, *gates]
    for pair in sets:
        args += ["--set", pair]
    args += extra
    r = CliRunner().invoke(cli, args, catch_exceptions=True)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2), (args, r.exit_code, r.output)
    assert "Traceback" not in r.output
    if r.exit_code == 2:
        assert len(r.stderr.splitlines()) == 1, (args, r.stderr)
