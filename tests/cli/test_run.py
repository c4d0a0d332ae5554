"""nxgates run: output lines, exit codes, the JSON report's schema, --set, --repeat and the gradient files."""

import json

import numpy as np
import pytest

from nxgates import __version__
from tests.helpers import assert_usage_error, run_in_process, run_script

T4 = "T4 grads as in the saved file (bit for bit, or within --ulp)"


def test_run_lora_passes_with_seed_lines(invoke):
    r = invoke("run", "lora")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert " PASS gradcheck A (lora) -- 12/12 cells within 70permil (worst=2permil)" in lines
    assert any(line.startswith(" PASS base W frozen") for line in lines)
    assert " LoRA gradcheck: 24/24 cells correct" in lines
    assert any(line.startswith("---- lora: passed 3 / 3") for line in lines)
    assert lines[-1].startswith("NX-INTFP-LORA verdict=GREEN 24/24")
    assert "\x1b[" not in r.stdout  # no colour codes when not a terminal


def test_alias_runs_the_same_gate(invoke):
    r = invoke("run", "lora-gradcheck", "-q")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [r.stdout.splitlines()[-1]]  # -q on a green run: the verdict alone


def test_planted_wrong_gradient_exits_1(invoke):
    r = invoke("run", "lora", "--inject", "grad-bug", "-q")
    assert r.exit_code == 1
    assert " FAIL gradcheck A (lora)" in r.stdout
    assert "verdict=RED" in r.stdout
    assert "PASS" not in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "lora", "--set", "DM=0"], "DM=0 is out of range"),
        (["run", "lora", "--set", "R=7"], "R=7 must not exceed DM=6"),
        (["run", "lora", "--set", "T=1.5"], "T takes an integer, got '1.5'"),
        (["run", "lora", "--set", "T="], "empty value for T"),
        (["run", "lora", "--set", "=3"], "expected KEY=VALUE"),
        (["run", "lora", "--set", "nope=3"], "unknown parameter for lora"),
        (["run", "lora", "--set", "algorithm=fastest"], "algorithm must be one of fast, naive"),
        (["run", "nosuchgate"], "unknown gate 'nosuchgate'"),
        (["run", "lora", "--preset", "huge"], "has no preset 'huge'"),
        (["run", "lora", "--inject", "nosuchfault"], "has no fault 'nosuchfault'"),
        (["run", "lora", "--bogus"], "No such option"),
        (["show", "nosuchgate"], "unknown gate"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(invoke, args, message):
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_json_to_stdout_has_the_documented_schema(invoke):
    r = invoke("run", "lora", "--json", "-")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)  # stdout holds the JSON alone; the human report went to stderr
    assert "verdict=GREEN" in r.stderr
    assert doc["nxgates"] == __version__ and doc["passed"] is True
    (gate,) = doc["gates"]
    assert set(gate) >= {"name", "passed", "seconds", "params", "checks", "metrics"}
    assert gate["name"] == "lora" and gate["passed"] is True
    assert gate["params"] == {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast",
                             "workers": 0, "executor": "auto"}
    assert [c["name"] for c in gate["checks"]] == ["gradcheck A (lora)", "gradcheck B (lora)", "base W frozen"]
    assert all(set(c) == {"name", "passed", "detail"} for c in gate["checks"])
    m = gate["metrics"]
    assert (m["loss_q"], m["trained_params"], m["total_params"], m["peft_permil"]) == (1329684529960, 24, 60, 400)
    for key, worst, maxabs in (("A", 2, 185888), ("B", 0, 367790)):
        t = m[key]
        assert set(t) == {"passed", "cells_passed", "cells", "worst_permil", "max_abs_grad", "analytic", "numeric"}
        assert (t["passed"], t["cells"], t["worst_permil"], t["max_abs_grad"]) == (True, 12, worst, maxabs)
        assert t["cells_passed"] == 12  # the seed's "12/12"
        assert all(isinstance(v, int) for v in t["analytic"] + t["numeric"])
    assert m["A"]["analytic"][8] == -185888  # cell order is the seed's row-major order


def test_json_file_and_failed_run(invoke, tmp_path):
    r = invoke("run", "lora", "--inject", "transposed-b", "--json", str(tmp_path / "r.json"))
    assert r.exit_code == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["passed"] is False and doc["gates"][0]["fault"] == "transposed-b"
    assert doc["gates"][0]["metrics"]["B"]["passed"] is False


def test_set_changes_sizes_and_is_reported(invoke):
    r = invoke("run", "lora", "--set", "DM=9", "--set", "lora.R=3", "--json", "-")
    assert r.exit_code == 0
    params = json.loads(r.stdout)["gates"][0]["params"]
    assert (params["DM"], params["R"]) == (9, 3)


def test_verbose_shows_every_cell(invoke):
    r = invoke("run", "lora", "-v")
    assert r.exit_code == 0
    assert sum("(lora) cell" in line for line in r.stdout.splitlines()) == 24


def test_local_gates_toml_replaces_the_packaged_one(invoke, tmp_path):
    (tmp_path / "gates.toml").write_text(
        '[gates.tiny]\nmodule = "lora"\ndescription = "a smaller lora"\n'
        "params = { T = 2, DM = 4, R = 1, delta = 2097, tol_permil = 70, algorithm = 'naive' }\n"
    )
    r = invoke("run", "tiny", "--json", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["gates"][0]["params"]["DM"] == 4
    assert invoke("run", "lora").exit_code == 2  # the local registry replaced the packaged one


def test_run_all_includes_every_gate(invoke):
    r = invoke("run", "all", "-q")
    assert r.exit_code == 0, r.output
    verdicts = r.stdout.splitlines()
    assert any(v.startswith("NX-INTFP-LORA verdict=GREEN") for v in verdicts)
    assert any(v.startswith("TA-PARALLEL-GRAD GREEN") for v in verdicts)
    assert any(v.startswith("TA-GRADCHECK GREEN") for v in verdicts)
    assert any(v.startswith("NX-INTFP-LORA-TRAIN GREEN") for v in verdicts)
    assert any(v.startswith("DP-TRAIN GREEN") for v in verdicts)
    assert any(v.startswith("INVARIANCE GREEN") for v in verdicts)
    assert verdicts[-1] == "==== nxgates: 6 / 6 gates passed -- GREEN"


def test_parallel_grad_seed_lines_and_save_compare(invoke, tmp_path):
    path = tmp_path / "g.npy"
    r = invoke("run", "parallel-grad", "--save-grads", str(path))
    assert r.exit_code == 0, r.output
    for line in (" workers=2 pool tasks completed=8/8",
                 " PASS T1 parallel grads BIT-IDENTICAL to serial (all B examples)",
                 " PASS T2 pool ran all B tasks on >1 worker",
                 " PASS T3 deterministic (re-run parallel identical)"):
        assert any(out.startswith(line) for out in r.stdout.splitlines()), line
    assert any(out.startswith("---- parallel-grad: passed 3 / 3") for out in r.stdout.splitlines())
    r = invoke("run", "parallel-grad", "--compare-grads", str(path), "--executor", "process")
    assert r.exit_code == 0 and f" PASS {T4} -- matches " in r.stdout and ", BIT-IDENTICAL" in r.stdout
    r = invoke("run", "parallel-grad", "--compare-grads", str(path), "--set", "B=4")
    assert r.exit_code == 2 and "does not match (B, NP) = (4, 192)" in r.stderr
    r = invoke("run", "parallel-grad", "--compare-grads", str(tmp_path / "missing.npy"))
    assert r.exit_code == 2 and "no such file" in r.stderr
    r = invoke("run", "lora", "--save-grads", str(path))
    assert r.exit_code == 2 and "--save-grads applies to none of: lora" in r.stderr


def test_json_metrics_of_parallel_grad(invoke):
    r = invoke("run", "parallel-grad", "--json", "-")
    m = json.loads(r.stdout)["gates"][0]["metrics"]
    for key in ("workers", "tasks_completed", "distinct_workers", "bit_mismatches", "nonzero_cells",
                "total_cells", "grads_sha256", "serial_seconds", "parallel_seconds"):
        assert key in m


def test_repeat_reports_agreement(invoke):
    r = invoke("run", "lora", "parallel-grad", "--repeat", "3", "--json", "-")
    assert r.exit_code == 0
    for gate in json.loads(r.stdout)["gates"]:
        (check,) = [c for c in gate["checks"] if c["name"] == "repeat: 3 runs agree"]
        assert check["passed"] and check["detail"].startswith("3/3 runs agreed")


def test_compare_grads_big_endian_file_and_devices(tmp_path):
    assert run_script("run", "parallel-grad", "--save-grads", "g.npy", cwd=tmp_path).returncode == 0
    grads = np.load(tmp_path / "g.npy")
    np.save(tmp_path / "be.npy", grads.astype(">f4"))
    r = run_script("run", "parallel-grad", "--compare-grads", "be.npy", cwd=tmp_path)
    assert r.returncode == 0 and f" PASS {T4} -- matches " in r.stdout and ", BIT-IDENTICAL" in r.stdout
    flipped = grads.copy()
    flipped.view(np.uint32)[3, 5] ^= 1  # one bit of one cell
    np.save(tmp_path / "be-flipped.npy", flipped.astype(">f4"))
    r = run_script("run", "parallel-grad", "--compare-grads", "be-flipped.npy", cwd=tmp_path)
    assert r.returncode == 1 and f" FAIL {T4} -- 1 cells differ" in r.stdout
    assert_usage_error(run_script("run", "parallel-grad", "--compare-grads", "/dev/zero", cwd=tmp_path),
                       "--compare-grads /dev/zero: not a regular file")
    np.save(tmp_path / "f8.npy", grads.astype("f8"))
    assert_usage_error(run_in_process("run", "parallel-grad", "--compare-grads", "f8.npy", cwd=tmp_path),
                       "expected float32, got float64")
    np.savez(tmp_path / "g.npz", grads=grads)
    assert_usage_error(run_in_process("run", "parallel-grad", "--compare-grads", "g.npz", cwd=tmp_path),
                       "an .npz archive, not an .npy array")


@pytest.mark.parametrize("executor, pool", [("thread", "thread pool"), ("process", "process pool")])
def test_the_banner_names_the_executor_used(tmp_path, executor, pool):
    r = run_script("run", "parallel-grad", "--executor", executor, cwd=tmp_path)
    assert r.returncode == 0
    assert f"trains DATA-PARALLEL on the {pool}; per-example grads" in r.stdout.splitlines()[1]


def test_lora_json_counts_the_cells_that_passed(tmp_path):
    green = json.loads(run_script("run", "lora", "--json", "-", cwd=tmp_path).stdout)["gates"][0]["metrics"]
    assert (green["A"]["cells_passed"], green["B"]["cells_passed"]) == (12, 12)
    assert green["A"]["passed"] is True
    red = json.loads(run_script("run", "lora", "--json", "-", "--inject", "grad-bug", cwd=tmp_path).stdout)
    a = red["gates"][0]["metrics"]["A"]
    assert a["passed"] is False and 0 <= a["cells_passed"] < a["cells"] == 12
