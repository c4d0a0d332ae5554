"""``nxgates crosscheck GATE LOG``: seed logs agree, every altered integer is caught, bad logs are exit 2."""

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates.cli import cli
from tests.oracles import seed_logs
from tests.oracles.seed_logs import lora_log, parallel_grad_log, serial_nonzero

DATA = Path(__file__).parent.parent / "data"
CROSSCHECK_DOC = Path(__file__).parent.parent.parent / "docs" / "crosscheck.md"
PG_SEED_K = 1191  # the seed-default non-zero gradient cells, as docs/crosscheck.md states
SCRIPT = shutil.which("nxgates", path=str(Path(sys.executable).parent)) or "nxgates-not-installed"


def pg_log(D=8, H=16, O=4, B=8, workers=16, **kw):
    return parallel_grad_log(workers=workers, ran=B, B=B, mism=0, chk=serial_nonzero(D, H, O, B),
                             NP=H * D + O * H, **kw)


@pytest.fixture
def cross(invoke, tmp_path):
    """Write ``text`` as a log file and crosscheck it."""

    def _cross(gate, text, *args):
        (tmp_path / "run.log").write_text(text)
        return invoke("crosscheck", gate, "run.log", *args)

    return _cross


def fails(r):
    return [line for line in r.stdout.splitlines() if line.startswith("FAIL ")]


def assert_usage_error(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, r.stderr


# ---- agreement -----------------------------------------------------------------------------------------


def test_seed_default_lora_log_agrees_figure_by_figure(cross):
    r = cross("lora", lora_log())
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    for line in ("PASS L_q32: 1329684529960", "PASS A (lora) worst permil: 2", "PASS A (lora) max|grad|: 185888",
                 "PASS B (lora) worst permil: 0", "PASS B (lora) max|grad|: 367790", "PASS rank: 2",
                 "PASS PEFT permil: 400", "PASS verdict: GREEN"):
        assert line in lines
    assert not fails(r)
    assert lines[-2] == "---- crosscheck lora: 20 / 20 figures agree (the log's own verdict: GREEN)"
    assert lines[-1] == "CROSSCHECK GREEN -- nxgates agrees with all 20 figures of the lora log"


@pytest.mark.parametrize("T,DM,R,delta,tol", [(1, 1, 1, 2097, 70), (5, 7, 3, 2097, 70), (2, 9, 9, 1, 0),
                                              (4, 11, 1, 50000, 70), (4, 20, 3, 2097, 1), (3, 6, 2, 2097, 0)])
def test_lora_logs_at_other_sizes_and_with_failing_cells_agree(cross, T, DM, R, delta, tol):
    text = lora_log(T, DM, R, delta, tol)
    r = cross("lora", text, "--set", f"T={T}", "--set", f"DM={DM}", "--set", f"R={R}", "--set", f"delta={delta}",
              "--set", f"tol_permil={tol}")
    assert r.exit_code == 0, fails(r)
    n_cells = text.count(" cell ")
    assert sum(line.startswith("PASS ") and " cell " in line for line in r.stdout.splitlines()) == 3 * n_cells


def test_a_red_log_that_nxgates_also_computes_red_agrees(cross):
    text = lora_log(TOLP=1)
    assert "verdict=RED 22/24" in text and " A (lora) cell 2 ana=20732 num=20196 rel=2\n" in text
    assert cross("lora", text, "--set", "tol_permil=1").exit_code == 0
    r = cross("lora", text)  # at the seed's tolerance, those cells pass: the log is wrong
    assert r.exit_code == 1
    assert "FAIL A (lora) failing cells: log [2, 3], nxgates (none)" in fails(r)


@pytest.mark.parametrize("D,H,O,B", [(8, 16, 4, 8), (5, 3, 2, 7), (31, 9, 3, 2)])
def test_parallel_grad_logs_agree(cross, D, H, O, B):
    r = cross("parallel-grad", pg_log(D, H, O, B), *(f"--set={k}={v}" for k, v in zip("DHOB", (D, H, O, B),
                                                                                       strict=True)))
    assert r.exit_code == 0, r.output
    assert "workers=16 (the NX machine's: reported, not compared)" in r.stdout
    assert f"PASS non-zero grad cells checked: {serial_nonzero(D, H, O, B)}" in r.stdout


def test_docs_state_the_seed_default_logs(cross):
    """docs/crosscheck.md's example logs are what the seeds print at their defaults, and nxgates agrees."""
    readme = CROSSCHECK_DOC.read_text()
    blocks = dict(re.findall(r"<!-- (seed-[a-z-]+-log) -->\n```text\n(.*?)```\n", readme, flags=re.DOTALL))
    assert blocks["seed-lora-log"] == lora_log()
    assert blocks["seed-parallel-grad-log"] == pg_log()
    assert serial_nonzero(8, 16, 4, 8) == PG_SEED_K
    assert cross("lora", blocks["seed-lora-log"]).exit_code == 0
    assert cross("parallel-grad", blocks["seed-parallel-grad-log"]).exit_code == 0
    assert "FAIL L_q32: log 1329684529961, nxgates 1329684529960" in readme


# ---- every altered integer is caught -------------------------------------------------------------------

FIGURE = re.compile(r"(?<=[ =(/])-?[0-9]+")  # integers the seed prints (not the 20 of Q20, nor the 1 of >1)


def mutations(name, text, skip=()):
    """One case per printed integer: that integer plus one, everything else untouched. ``skip``: the
    integers right after these labels (``workers=``, which is not compared)."""
    cases = []
    for m in FIGURE.finditer(text):
        line = text[: m.start()].count("\n") + 1
        if any(text[: m.start()].endswith(label) for label in skip):
            continue
        altered = text[: m.start()] + str(int(m.group()) + 1) + text[m.end():]
        cases.append(pytest.param(altered, id=f"{name}-line{line}-{m.group()}"))
    return cases


LORA_RED = lora_log(TOLP=1)


@pytest.mark.parametrize("altered", mutations("seed", lora_log()) + mutations("tol1", LORA_RED))
def test_every_lora_integer_is_compared(cross, altered):
    tol = "70" if "verdict=GREEN" in altered or "rel=" not in altered else "1"
    r = cross("lora", altered, "--set", f"tol_permil={tol}")
    assert r.exit_code == 1, r.output
    assert fails(r) and all(": log " in line for line in fails(r))


def test_the_mutations_cover_every_lora_field():
    count = len(mutations("tol1", LORA_RED))
    # rank; frozen, trainable, permil, L_q32; 2 failing lines x (cell, ana, num, rel); 2 x 4 summaries;
    # total 2; verdict 2
    assert count == 1 + 4 + 8 + 8 + 2 + 2


PG_SEED = pg_log()


@pytest.mark.parametrize("altered", mutations("seed", PG_SEED, skip=("workers=",)))
def test_every_parallel_grad_integer_is_compared(cross, altered):
    r = cross("parallel-grad", altered)
    assert r.exit_code == 1, r.output
    assert fails(r)


def test_parallel_grad_mutations_cover_every_field():
    # completed, B; mismatches, checked, total; passed, of
    assert len(mutations("seed", PG_SEED, skip=("workers=",))) == 7


@pytest.mark.parametrize("check", ["T1", "T2", "T3"])
def test_every_parallel_grad_check_word_is_compared(cross, check):
    r = cross("parallel-grad", PG_SEED.replace(f" PASS {check} ", f" FAIL {check} "))
    assert r.exit_code == 1
    assert [line.split(":")[0] for line in fails(r)] == [f"FAIL {check} " + {
        "T1": "parallel grads BIT-IDENTICAL to serial (all B examples)",
        "T2": "pool ran all B tasks on >1 worker",
        "T3": "deterministic (re-run parallel identical)"}[check]]


def test_verdict_words_are_compared(cross):
    # a RED verdict is printed with the RED tail (a GREEN one with the RED tail is not a seed log at all)
    green_line = seed_logs.LORA_GREEN.format(tot=24, want=24)
    r = cross("lora", lora_log().replace(green_line, seed_logs.LORA_RED.format(tot=24, want=24)))
    assert r.exit_code == 1 and fails(r) == ["FAIL verdict: log RED, nxgates GREEN"]
    red = PG_SEED.splitlines(keepends=True)[:-1] + ["RED -- parallel training not correct (see mismatches)\n"]
    r = cross("parallel-grad", "".join(red))
    assert r.exit_code == 1 and fails(r) == ["FAIL verdict: log RED, nxgates GREEN"]


def test_workers_is_reported_not_compared(cross):
    r = cross("parallel-grad", PG_SEED.replace("workers=16", "workers=3"))
    assert r.exit_code == 0 and "workers=3 (the NX machine's" in r.stdout


# ---- not a run of that gate: exit 2 --------------------------------------------------------------------


def test_truncated_log(cross):
    text = lora_log()
    r = cross("lora", text[: text.index(" B (lora):")])
    assert_usage_error(r, "log run.log: truncated: ends after line 5, expected the lora line ' B (lora): P/N")
    assert_usage_error(cross("lora", text[:-3]), "truncated: its last line has no newline")
    assert_usage_error(cross("parallel-grad", PG_SEED[: PG_SEED.index("---- ")]), "truncated: ends after line 6")
    assert_usage_error(cross("lora", ""), "truncated: ends after line 0")


def test_a_log_of_the_other_gate(cross):
    assert_usage_error(cross("lora", PG_SEED), "line 1: expected the lora line", "(this is a parallel-grad log)")
    assert_usage_error(cross("parallel-grad", lora_log()), "line 1: expected the parallel-grad line",
                       "(this is a lora log)")


@pytest.mark.parametrize("args, fragment", [
    (["crosscheck", "lora", "missing.log"], "log missing.log: no such file"),
    (["crosscheck", "lora", "."], "log .: is a directory"),
    (["crosscheck", "ta-gradcheck", "x.log"], "no seed log format to crosscheck (crosscheck knows: lora, par"),
    (["crosscheck", "nosuch", "x.log"], "unknown gate 'nosuch'"),
    (["crosscheck", "lora", "x.log", "--set", "DM=0"], "DM=0 is out of range"),
    (["crosscheck", "lora", "x.log", "--preset", "huge"], "has no preset 'huge'"),
    (["crosscheck", "lora", "x.log", "--source", "missing.nx"], "--source missing.nx: no such file"),
    (["crosscheck", "lora", "x.log", "--json", "-", "--junit", "-"], "cannot both write to stdout"),
    (["crosscheck", "lora"], "Missing argument 'LOG'"),
])
def test_bad_arguments_are_one_line_exit_2(invoke, tmp_path, args, fragment):
    (tmp_path / "x.log").write_text(lora_log())
    assert_usage_error(invoke(*args), fragment)


def test_binary_log_is_a_usage_error(invoke, tmp_path):
    (tmp_path / "bin.log").write_bytes(b"\xff\xfe garbage\n")
    assert_usage_error(invoke("crosscheck", "lora", "bin.log"), "not UTF-8 text")


# ---- --source ------------------------------------------------------------------------------------------


def edited(tmp_path, name, changes):
    text = (DATA / name).read_text()
    for old, new in changes.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path.name


LORA_EDITS = {"const T: i64 = 3": "const T: i64 = 4", "const DM: i64 = 6": "const DM: i64 = 7",
              "const R: i64 = 2 ": "const R: i64 = 3 ", "DELTA: i64=2097": "DELTA: i64=1000",
              "TOLP: i64=70": "TOLP: i64=0"}


def test_lora_source_with_changed_constants(cross, tmp_path):
    src = edited(tmp_path, "nx_intfp_lora_gradcheck_gate.nx", LORA_EDITS)
    text = lora_log(4, 7, 3, 1000, 0)
    r = cross("lora", text, "--source", src)
    assert r.exit_code == 0, r.output
    assert "T=4 DM=7 R=3 delta=1000 tol_permil=0" in r.stdout.splitlines()[0]
    assert cross("lora", text).exit_code == 1  # at the seed's defaults, the edited program's log disagrees
    assert cross("lora", lora_log(), "--source", src).exit_code == 1


def test_parallel_grad_source_with_changed_constants(cross, tmp_path):
    src = edited(tmp_path, "nx_ta_parallel_grad_gate.nx", {
        "PG_D: i64 = 8": "PG_D: i64 = 5", "PG_H: i64 = 16": "PG_H: i64 = 3", "PG_O: i64 = 4": "PG_O: i64 = 2",
        "PG_NW1: i64 = 128": "PG_NW1: i64 = 15", "PG_NW2: i64 = 64": "PG_NW2: i64 = 6",
        "PG_NP: i64 = 192": "PG_NP: i64 = 21", "PG_B: i64 = 8": "PG_B: i64 = 7"})
    r = cross("parallel-grad", pg_log(5, 3, 2, 7), "--source", src)
    assert r.exit_code == 0, r.output
    assert cross("parallel-grad", pg_log(5, 3, 2, 7)).exit_code == 1


@pytest.mark.parametrize("changes, fragment", [
    ({"const DM: i64 = 6": "const DM: i64 = 3+3"}, "DM is not an integer literal"),
    ({"const R: i64 = 2 ": "const RANK: i64 = 2 "}, "cannot read R: no declaration"),
    ({"TOLP: i64=70": "TOLP: i64=x"}, "TOLP is not an integer literal"),
    ({"const DM: i64 = 6": "const DM: i64 = 0"}, "--source nx_intfp_lora_gradcheck_gate.nx: DM=0 is out of range"),
    ({"const R: i64 = 2 ": "const R: i64 = 9 "}, "R=9 must not exceed DM=6"),
])
def test_unreadable_source_constants_are_exit_2(cross, tmp_path, changes, fragment):
    src = edited(tmp_path, "nx_intfp_lora_gradcheck_gate.nx", changes)
    assert_usage_error(cross("lora", lora_log(), "--source", src), fragment)


def test_source_and_set_of_the_same_constant_conflict(cross, tmp_path):
    src = edited(tmp_path, "nx_intfp_lora_gradcheck_gate.nx", {})
    assert_usage_error(cross("lora", lora_log(), "--source", src, "--set", "DM=6"), "--set DM: conflicts with")
    assert_usage_error(cross("lora", lora_log(), "--source", src, "--preset", "large"), "cannot be combined")
    assert cross("lora", lora_log(), "--source", src, "--set", "algorithm=naive").exit_code == 0
    assert_usage_error(cross("lora", lora_log(), "--source", "nx_intfp_lora_gradcheck_gate.nx".replace("lora", "x")),
                       "no such file")
    pg_src = edited(tmp_path, "nx_ta_parallel_grad_gate.nx", {})
    assert_usage_error(cross("lora", lora_log(), "--source", pg_src), "cannot read S: no declaration")


# ---- reports -------------------------------------------------------------------------------------------


def test_json_and_junit_reports(cross, tmp_path):
    r = cross("lora", lora_log().replace("=367790", "=367791"), "--json", "-", "--junit", "r.xml")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)  # JSON alone on stdout; the human report went to stderr
    assert "FAIL B (lora) max|grad|: log 367791, nxgates 367790" in r.stderr
    (gate,) = doc["gates"]
    assert doc["passed"] is False and gate["name"] == "lora" and gate["params"]["DM"] == 6
    bad = [c for c in gate["checks"] if not c["passed"]]
    assert bad == [{"name": "B (lora) max|grad|", "passed": False, "detail": "log 367791, nxgates 367790"}]
    assert gate["metrics"]["log"]["L_q32"] == gate["metrics"]["nxgates"]["L_q32"] == 1329684529960
    assert gate["metrics"]["disagreements"] == 1 and gate["metrics"]["log_verdict"] == "GREEN"
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite.get("tests") == "20" and suite.get("failures") == "1"
    (failed,) = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "B (lora) max|grad|"


def test_quiet_prints_fail_lines_and_the_verdict(cross):
    r = cross("lora", lora_log().replace("(rank 2)", "(rank 3)"), "-q")
    assert r.exit_code == 1
    assert r.stdout.splitlines() == ["FAIL rank: log 3, nxgates 2",
                                     "CROSSCHECK RED -- 1 of 20 figures of the lora log disagree with nxgates"]


def test_timeout_fails_the_crosscheck(cross):
    r = cross("lora", lora_log(), "--set", "T=8", "--set", "DM=96", "--set", "R=4", "--set",
              "algorithm=naive", "--timeout", "0.001")
    assert r.exit_code == 1
    assert "timed out after 0.001 s" in r.stdout


def test_through_the_console_script_with_stdin(tmp_path):
    ok = subprocess.run([SCRIPT, "crosscheck", "lora", "-"], input=lora_log(), capture_output=True, text=True,
                        cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([SCRIPT, "crosscheck", "lora-gradcheck", "-"], capture_output=True, text=True,
                         input=lora_log().replace("L_q32=1329684529960", "L_q32=1329684529961"), cwd=tmp_path,
                         timeout=120)
    assert bad.returncode == 1
    assert "FAIL L_q32: log 1329684529961, nxgates 1329684529960" in bad.stdout.splitlines()
    trunc = subprocess.run([SCRIPT, "crosscheck", "lora", "-"], input=lora_log()[:200], capture_output=True,
                           text=True, cwd=tmp_path, timeout=120)
    assert trunc.returncode == 2 and trunc.stdout == "" and trunc.stderr.count("\n") == 1


def test_sizes_that_would_overflow_are_exit_2_before_any_output(cross, tmp_path):
    src = edited(tmp_path, "nx_intfp_lora_gradcheck_gate.nx", {"DELTA: i64=2097": "DELTA: i64=1099511627776"})
    assert_usage_error(cross("lora", lora_log(), "--source", src), "int64 overflow guard")
    assert_usage_error(cross("lora", lora_log(), "--set", "T=100000", "--set", "DM=100000"), "memory budget")


def test_a_flood_of_failing_cell_lines_is_one_disagreement_per_line_at_most(cross):
    line = " A (lora) cell 3 ana=1 num=2 rel=3\n"
    text = lora_log().replace(" A (lora): 12/12", line * 5000 + " A (lora): 12/12")
    r = cross("lora", text, "-q")
    assert r.exit_code == 1
    assert len(fails(r)) <= 3 * 12 + 1
    assert "FAIL A (lora) failing cells: log [3, 3, 3" in r.stdout and "(5000 in all)]" in r.stdout


EDITS = st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 40), st.text(max_size=12)), min_size=1, max_size=4)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gate=st.sampled_from(["lora", "parallel-grad"]), edits=EDITS)
def test_random_log_damage_never_traces_back(tmp_path, gate, edits):
    """Cut, insert and overwrite anywhere in a seed log: exit 0, 1 or 2, never a traceback."""
    text = lora_log() if gate == "lora" else PG_SEED
    for at, cut, insert in edits:
        at = at % (len(text) + 1)
        text = text[:at] + insert + text[at + cut:]
    (tmp_path / "damaged.log").write_text(text, encoding="utf-8", errors="surrogatepass")
    r = CliRunner().invoke(cli, ["crosscheck", gate, str(tmp_path / "damaged.log")], catch_exceptions=True)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2), (r.exit_code, r.output)
    assert "Traceback" not in r.output
    if r.exit_code == 2:
        assert len(r.stderr.splitlines()) == 1 and r.stdout == "", r.output
