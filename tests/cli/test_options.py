"""Option values: bounded --repeat, positive --timeout, options given twice, odd names; usage errors are
exit 2 and one line."""

import json

import pytest

from tests.helpers import assert_usage_error, run_in_process, run_script


def test_repeat_has_an_upper_bound(tmp_path):
    assert_usage_error(run_script("run", "lora", "--repeat", "1000000000", "--timeout", "2", cwd=tmp_path), "--repeat")
    assert run_script("run", "lora", "--repeat", "3", cwd=tmp_path).returncode == 0


def test_timeout_nan_is_refused(tmp_path):
    assert_usage_error(run_script("run", "lora", "--timeout", "nan", cwd=tmp_path), "--timeout", "nan")


@pytest.mark.parametrize("value", ["-nan", "0", "-1", "-inf", "1e-400"])
def test_timeout_must_be_a_positive_number(tmp_path, value):
    assert_usage_error(run_in_process("run", "lora", f"--timeout={value}", cwd=tmp_path), "--timeout")


def test_timeout_inf_means_no_limit(tmp_path):
    r = run_script("run", "lora", "--timeout", "inf", "--repeat", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "PASS repeat: 2 runs agree" in r.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--inject", "grad-bug", "--inject", "train-base"], "'grad-bug' and 'train-base'"),
    (["--json", "a.json", "--json", "b.json"], "--json"),
    (["--preset", "medium", "--preset", "large"], "--preset"),
    (["--timeout", "5", "--timeout", "6"], "--timeout"),
    (["--repeat", "2", "--repeat", "3"], "--repeat"),
])
def test_an_option_given_twice_with_different_values_is_refused(tmp_path, args, fragment):
    runner = run_script if args[0] == "--inject" else run_in_process
    assert_usage_error(runner("run", "lora", *args, cwd=tmp_path), "given 2 times with different values", fragment)


def test_the_same_value_twice_is_harmless(tmp_path):
    r = run_script("run", "lora", "--inject", "train-base", "--inject", "train-base", cwd=tmp_path)
    assert r.returncode == 1 and " FAIL base W frozen" in r.stdout


def test_set_twice_warns_and_keeps_the_last(tmp_path):
    r = run_script("run", "lora", "--set", "DM=6", "--set", "DM=8", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.splitlines()[0] == "nxgates: warning: --set DM given 2 times (6, 8); using the last, DM=8"
    assert json.loads(r.stdout)["gates"][0]["params"]["DM"] == 8
    assert "warning" not in run_in_process("run", "lora", "--set", "DM=6", "--set", "DM=6", cwd=tmp_path).stderr


def test_empty_preset_name_is_unknown(tmp_path):
    assert_usage_error(run_script("run", "lora", "--preset", "", cwd=tmp_path), "has no preset ''")


def test_a_huge_gate_name_is_cut_in_the_error(tmp_path):
    r = run_script("run", "x" * 100_000, cwd=tmp_path)
    assert_usage_error(r, "unknown gate", "(100000 characters)")
    assert len(r.stderr) < 400


@pytest.mark.parametrize("args, fragment", [
    (["run", "lora", "--set", "DM=" + "9" * 40], "(40 digits) is out of range [1, 1048576]"),
    (["show", "all"], "show takes one gate"),
])
def test_odd_arguments(tmp_path, args, fragment):
    assert_usage_error(run_in_process(*args, cwd=tmp_path), fragment)
