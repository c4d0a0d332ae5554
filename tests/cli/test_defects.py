"""Issue 13's defects, each pinned through the installed console script (what a user and CI run).

Every test here failed before its fix: a hang or 24 GB read, a traceback, a wrong exit code, a silently
lost report or fault. Usage errors are exit 2 with exactly one line on stderr.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.cli.test_console_script import SCRIPT

GOOD_TABLE = ('[gates.lora]\nmodule = "lora"\ndescription = "d"\n'
              "params = { T = 3, DM = 6, R = 2, delta = 2097, tol_permil = 70, algorithm = 'fast' }\n")


def run(*args, cwd, stdin=subprocess.DEVNULL, timeout=60):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, cwd=cwd, stdin=stdin, timeout=timeout)


def run_in_process(*args, cwd):
    """The same CLI in-process (no interpreter start-up): for the variants of a defect already pinned
    through the console script."""
    from click.testing import CliRunner

    from nxgates.cli import cli

    here = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    finally:
        os.chdir(here)
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


def shell(command, cwd, timeout=60):
    """``command`` in sh with $NX the console script: for redirections such as ``>&-``."""
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "NX": SCRIPT})


def assert_usage_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nxgates: error: "), r.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# ---- 1. every file nxgates reads is bounded ---------------------------------------------------------------

def test_1_config_that_never_ends_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    (tmp_path / "big.toml").write_bytes(b"#" * ((1 << 20) + 1))
    with open("/dev/zero", "rb") as zero:
        assert_usage_error(run("run", "lora", "--config", "/dev/stdin", cwd=tmp_path, stdin=zero),
                           "not a regular file")
    with open("/dev/zero", "rb") as zero:
        assert_usage_error(run("run", "lora", "--config", "-", cwd=tmp_path, stdin=zero), "larger than 1.0 MiB")
    assert_usage_error(run("run", "lora", "--config", "/dev/zero", cwd=tmp_path), "/dev/zero", "not a regular file")
    assert_usage_error(run("run", "lora", "--config", str(fifo), cwd=tmp_path), "not a regular file")
    assert_usage_error(run("list", "--config", "big.toml", cwd=tmp_path), "big.toml", "larger than 1.0 MiB")


def test_1_config_from_stdin_still_works(tmp_path):
    with open(tmp_path / "cfg", "w+") as fh:
        fh.write(GOOD_TABLE)
        fh.seek(0)
        r = run("run", "lora", "--config", "-", cwd=tmp_path, stdin=fh)
    assert r.returncode == 0, r.stderr


# ---- 2. process workers are capped ------------------------------------------------------------------------

def test_2_a_thousand_forked_workers_are_refused_not_hung(tmp_path):
    r = run("run", "parallel-grad", "--set", "workers=1024", "--set", "executor=process", "--timeout", "10",
            cwd=tmp_path)
    assert_usage_error(r, "workers=1024", "at most", "executor=thread")


def test_2_process_workers_within_the_cap_run(tmp_path):
    r = run("run", "parallel-grad", "--set", "workers=3", "--set", "executor=process", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "workers=3 pool tasks completed=8/8" in r.stdout


# ---- 3 and 4. --repeat and --timeout ----------------------------------------------------------------------

def test_3_repeat_has_an_upper_bound(tmp_path):
    assert_usage_error(run("run", "lora", "--repeat", "1000000000", "--timeout", "2", cwd=tmp_path), "--repeat")
    assert run("run", "lora", "--repeat", "3", cwd=tmp_path).returncode == 0


def test_4_timeout_nan_is_refused(tmp_path):
    assert_usage_error(run("run", "lora", "--timeout", "nan", cwd=tmp_path), "--timeout", "nan")


@pytest.mark.parametrize("value", ["-nan", "0", "-1", "-inf", "1e-400"])
def test_4_timeout_must_be_a_positive_number(tmp_path, value):
    assert_usage_error(run_in_process("run", "lora", f"--timeout={value}", cwd=tmp_path), "--timeout")


def test_4_timeout_inf_means_no_limit(tmp_path):
    r = run("run", "lora", "--timeout", "inf", "--repeat", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "PASS repeat: 2 runs agree" in r.stdout


# ---- 5. closed stdout -------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ['"$NX" run lora >&-', '"$NX" run lora --json - >&-', '"$NX" list >&-'])
def test_5_closed_stdout_is_one_clear_line(tmp_path, command):
    r = shell(command, tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        r.stderr.splitlines()[0]] and "standard output is closed" in r.stderr, r.stderr
    assert "AttributeError" not in r.stderr


def test_5_closed_stderr_is_tolerated(tmp_path):
    r = shell('"$NX" run lora --json - 2>&-', tmp_path)
    assert r.returncode == 0
    assert json.loads(r.stdout)["passed"] is True


# ---- 6. two outputs, one file -----------------------------------------------------------------------------

def test_6_one_path_for_two_outputs_is_refused(tmp_path):
    (tmp_path / "sub").mkdir()
    os.symlink("sub/out.json", tmp_path / "link.json")
    assert_usage_error(run("run", "lora", "--json", "out.json", "--junit", "out.json", cwd=tmp_path),
                       "--json and --junit name the same file")
    assert_usage_error(run("run", "lora", "--json", "sub/out.json", "--junit", "link.json", cwd=tmp_path),
                       "same file")
    assert_usage_error(run("run", "lora", "--json", "./out.json", "--junit", "out.json", cwd=tmp_path),
                       "same file")
    assert_usage_error(run("run", "parallel-grad", "--save-grads", "g.npy", "--compare-grads", "./g.npy",
                           cwd=tmp_path), "same file")
    assert not (tmp_path / "out.json").exists()


# ---- 7 and SIGTERM: one line, the reports of finished gates, no traceback from any thread or worker --------

def _session_processes(sid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _stop_mid_run(tmp_path, args, sig, group):
    """Start a long run in its own session, let it work, signal it (its whole group, as a terminal's
    Ctrl-C or ``timeout`` does, or the main process only), and return (exit code, stderr lines)."""
    proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    try:
        time.sleep(1.0)  # imports done, inside the pool passes of the repeated gate
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        try:
            _out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # the stop was lost: show where every thread of the run was
            os.kill(proc.pid, signal.SIGABRT)  # faulthandler prints the stacks, then the process aborts
            _out, dump = proc.communicate(timeout=10)
            pytest.fail(f"{sig.name} did not stop the run within 30 s; its threads:\n{dump[-8000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for _ in range(50):  # workers end with their parent; give the kernel a moment to reap them
        if not _session_processes(proc.pid):
            break
        time.sleep(0.1)
    leftovers = _session_processes(proc.pid)
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, "worker processes outlived the run"
    return proc.returncode, err.splitlines()


LONG_POOL_RUN = ["run", "parallel-grad", "lora", "--preset", "medium", "--repeat", "10000", "--timeout", "60",
                 "--json", "r.json"]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_7_ctrl_c_is_one_line_and_exit_130(tmp_path, executor):
    code, err = _stop_mid_run(tmp_path, [*LONG_POOL_RUN, "--set", f"executor={executor}"], signal.SIGINT,
                              group=True)
    assert code == 130
    assert err == ["nxgates: interrupted; writing the reports of finished gates"]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False


LOST_IN_A_FINALIZER = """
import os, signal, sys, time, weakref
from nxgates.cli import signals

signals.install_stop_handlers()
def callback(_ref):  # the signal arrives while Python runs a weakref callback, where it ignores exceptions
    os.kill(os.getpid(), signal.SIG{name})
    start = time.monotonic()
    while time.monotonic() - start < 0.2:
        pass
class Box:
    pass
box = Box()
ref = weakref.ref(box, callback)
try:
    del box
    for _ in range(100):
        time.sleep(0.01)
    print("not stopped")
except KeyboardInterrupt as exc:
    print("stopped", type(exc).__name__)
"""


@pytest.mark.parametrize("name, raised", [("TERM", "Terminated"), ("HUP", "Terminated"),
                                          ("INT", "KeyboardInterrupt")])
def test_a_stop_signal_inside_a_finalizer_is_not_lost(name, raised):
    """Python prints an exception raised in a weakref callback or __del__ and carries on: a SIGTERM landing
    there once left a run going for its whole --timeout. The stop must arrive, and nothing be printed."""
    python = str(Path(SCRIPT).with_name("python"))
    done = subprocess.run([python, "-c", LOST_IN_A_FINALIZER.replace("{name}", name)], capture_output=True,
                          text=True, timeout=60)
    assert (done.stdout.strip(), done.stderr) == (f"stopped {raised}", "")


def test_other_exceptions_in_a_finalizer_are_printed_as_python_prints_them():
    script = ("from nxgates.cli import signals\nsignals.install_stop_handlers()\n"
              "class Box:\n    def __del__(self):\n        raise ValueError('planted')\nBox()\nprint('went on')\n")
    python = str(Path(SCRIPT).with_name("python"))
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout == "went on\n"
    assert "Exception ignored in" in done.stderr and "ValueError: planted" in done.stderr


@pytest.mark.parametrize("group", [False, True])
def test_sigterm_is_a_clean_interruption_with_exit_143(tmp_path, group):
    code, err = _stop_mid_run(tmp_path, [*LONG_POOL_RUN, "--set", "executor=process"], signal.SIGTERM, group)
    assert code == 143
    assert err == ["nxgates: terminated (SIGTERM); writing the reports of finished gates"]
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] is True


# ---- 8. a reader closing the pipe -------------------------------------------------------------------------

def _first_line_then_close(tmp_path, *args):
    proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`: parallel-grad's lines, still to come, meet a closed pipe
    err = proc.stderr.read()
    proc.wait(timeout=60)
    return proc.returncode, first, err


def test_8_head_dash_1_keeps_the_verdict_and_the_reports(tmp_path):
    code, first, err = _first_line_then_close(tmp_path, "run", "lora", "parallel-grad", "--json", "r.json",
                                              "--junit", "r.xml")
    assert (code, first, err) == (0, "# gate lora\n", "")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["passed"] is True and [g["name"] for g in doc["gates"]] == ["lora", "parallel-grad"]
    assert (tmp_path / "r.xml").read_text().rstrip().endswith("</testsuites>")


def test_8_a_closed_pipe_keeps_a_red_verdict(tmp_path):
    """-v prints a line per cell: far more than a pipe holds, so the closed pipe is met mid-report."""
    code, first, err = _first_line_then_close(tmp_path, "run", "lora", "-v", "--set", "DM=128", "--set", "R=8",
                                              "--inject", "grad-bug", "--json", "r.json")
    assert (code, first, err) == (1, "# gate lora [fault injected: grad-bug]\n", "")
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is False


def test_8_list_into_a_closed_pipe_is_not_an_error(tmp_path):
    proc = subprocess.Popen([SCRIPT, "show", "parallel-grad"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 0 and err == ""


# ---- 9. repeated options ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (["--inject", "grad-bug", "--inject", "train-base"], "'grad-bug' and 'train-base'"),
    (["--json", "a.json", "--json", "b.json"], "--json"),
    (["--preset", "medium", "--preset", "large"], "--preset"),
    (["--timeout", "5", "--timeout", "6"], "--timeout"),
    (["--repeat", "2", "--repeat", "3"], "--repeat"),
])
def test_9_an_option_given_twice_with_different_values_is_refused(tmp_path, args, fragment):
    runner = run if args[0] == "--inject" else run_in_process
    assert_usage_error(runner("run", "lora", *args, cwd=tmp_path), "given 2 times with different values", fragment)


def test_9_the_same_value_twice_is_harmless(tmp_path):
    r = run("run", "lora", "--inject", "train-base", "--inject", "train-base", cwd=tmp_path)
    assert r.returncode == 1 and " FAIL base W frozen" in r.stdout


def test_9_set_twice_warns_and_keeps_the_last(tmp_path):
    r = run("run", "lora", "--set", "DM=6", "--set", "DM=8", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.splitlines()[0] == "nxgates: warning: --set DM given 2 times (6, 8); using the last, DM=8"
    assert json.loads(r.stdout)["gates"][0]["params"]["DM"] == 8
    assert "warning" not in run_in_process("run", "lora", "--set", "DM=6", "--set", "DM=6", cwd=tmp_path).stderr


# ---- 10 and 11. reserved names and presets ----------------------------------------------------------------

@pytest.mark.parametrize("config, fragments", [
    (GOOD_TABLE + 'aliases = ["all"]\n', ("alias 'all' is reserved",)),
    (GOOD_TABLE.replace("[gates.lora]", "[gates.all]"), ("[gates.all]", "'all' is reserved")),
    (GOOD_TABLE + "[gates.lora.presets.seed]\nT = 4\n", ("presets.seed", "'seed' is reserved")),
    (GOOD_TABLE + "[gates.lora.presets.wide]\nR = 9\n", ("presets.wide", "R=9 must not exceed DM=6")),
    (GOOD_TABLE + "[gates.lora.presets.wide]\nDM = 0\n", ("presets.wide", "DM=0 is out of range")),
])
def test_10_config_mistakes_are_refused_when_loaded(tmp_path, config, fragments):
    (tmp_path / "gates.toml").write_text(config)
    command = ["list"] if "[gates.all]" in config else ["run", "lora"]
    assert_usage_error(run(*command, cwd=tmp_path), "gates.toml", *fragments)
    if "[gates.all]" not in config:
        assert_usage_error(run_in_process("show", "lora", cwd=tmp_path), "gates.toml", *fragments)


def test_10_a_preset_too_big_for_this_machine_is_checked_only_when_chosen(tmp_path):
    (tmp_path / "gates.toml").write_text(GOOD_TABLE + "[gates.lora.presets.huge]\nT = 1048576\nDM = 1048576\n")
    assert run("run", "lora", cwd=tmp_path).returncode == 0
    assert_usage_error(run("run", "lora", "--preset", "huge", cwd=tmp_path), "memory budget")


def test_11_empty_preset_name_is_unknown(tmp_path):
    assert_usage_error(run("run", "lora", "--preset", "", cwd=tmp_path), "has no preset ''")


# ---- 12. smaller ones -------------------------------------------------------------------------------------

def test_12_a_huge_gate_name_is_cut_in_the_error(tmp_path):
    r = run("run", "x" * 100_000, cwd=tmp_path)
    assert_usage_error(r, "unknown gate", "(100000 characters)")
    assert len(r.stderr) < 400


def test_12_compare_grads_big_endian_file_and_devices(tmp_path):
    assert run("run", "parallel-grad", "--save-grads", "g.npy", cwd=tmp_path).returncode == 0
    grads = np.load(tmp_path / "g.npy")
    np.save(tmp_path / "be.npy", grads.astype(">f4"))
    r = run("run", "parallel-grad", "--compare-grads", "be.npy", cwd=tmp_path)
    assert r.returncode == 0 and " PASS T4 grads BIT-IDENTICAL to the saved file" in r.stdout
    flipped = grads.copy()
    flipped.view(np.uint32)[3, 5] ^= 1  # one bit of one cell
    np.save(tmp_path / "be-flipped.npy", flipped.astype(">f4"))
    r = run("run", "parallel-grad", "--compare-grads", "be-flipped.npy", cwd=tmp_path)
    assert r.returncode == 1 and " FAIL T4 grads BIT-IDENTICAL to the saved file -- 1 cells differ" in r.stdout
    assert_usage_error(run("run", "parallel-grad", "--compare-grads", "/dev/zero", cwd=tmp_path),
                       "--compare-grads /dev/zero: not a regular file")
    np.save(tmp_path / "f8.npy", grads.astype("f8"))
    assert_usage_error(run_in_process("run", "parallel-grad", "--compare-grads", "f8.npy", cwd=tmp_path),
                       "expected float32, got float64")
    np.savez(tmp_path / "g.npz", grads=grads)
    assert_usage_error(run_in_process("run", "parallel-grad", "--compare-grads", "g.npz", cwd=tmp_path),
                       "an .npz archive, not an .npy array")


@pytest.mark.parametrize("executor, pool", [("thread", "thread pool"), ("process", "process pool")])
def test_12_the_banner_names_the_executor_used(tmp_path, executor, pool):
    r = run("run", "parallel-grad", "--executor", executor, cwd=tmp_path)
    assert r.returncode == 0
    assert f"trains DATA-PARALLEL on the {pool}; per-example grads" in r.stdout.splitlines()[1]


# ---- 13. lora JSON --------------------------------------------------------------------------------------

def test_13_lora_json_counts_the_cells_that_passed(tmp_path):
    green = json.loads(run("run", "lora", "--json", "-", cwd=tmp_path).stdout)["gates"][0]["metrics"]
    assert (green["A"]["cells_passed"], green["B"]["cells_passed"]) == (12, 12)
    assert green["A"]["passed"] is True
    red = json.loads(run("run", "lora", "--json", "-", "--inject", "grad-bug", cwd=tmp_path).stdout)
    a = red["gates"][0]["metrics"]["A"]
    assert a["passed"] is False and 0 <= a["cells_passed"] < a["cells"] == 12


# ---- found by trying hostile input (issue 13, "try it yourself") ------------------------------------------

def test_try_report_targets_that_would_block_or_waste_a_run(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "adir").mkdir()
    assert_usage_error(run("run", "lora", "--json", "fifo", cwd=tmp_path), "--json fifo: is a FIFO")
    assert_usage_error(run("run", "parallel-grad", "--save-grads", "fifo", cwd=tmp_path), "is a FIFO")
    assert_usage_error(run("run", "parallel-grad", "--save-grads", "adir", cwd=tmp_path), "is a directory")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_try_stdout_on_a_full_disk_is_one_line_and_reports_are_written(tmp_path):
    r = shell('"$NX" run lora --json r.json >/dev/full', tmp_path)
    assert r.returncode == 2
    assert r.stderr == "nxgates: error: cannot write the report to standard output: No space left on device\n"
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is True
    for command in ('"$NX" run lora --json - >/dev/full', '"$NX" list >/dev/full', '"$NX" selftest lora >/dev/full'):
        r = shell(command, tmp_path)
        assert r.returncode == 2 and "No space left on device" in r.stderr, (command, r.stderr)
        assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
    r = shell('"$NX" run lora --json - 2>/dev/full', tmp_path)  # only the human report is lost
    assert r.returncode == 0 and json.loads(r.stdout)["passed"] is True


@pytest.mark.parametrize("args, fragment", [
    (["run", "lora", "--set", "DM=" + "9" * 40], "(40 digits) is out of range [1, 1048576]"),
    (["show", "all"], "show takes one gate"),
])
def test_try_odd_arguments(tmp_path, args, fragment):
    assert_usage_error(run_in_process(*args, cwd=tmp_path), fragment)


@pytest.mark.parametrize("config, fragment", [
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),  # was exit 3, RecursionError
    (GOOD_TABLE + '[gates.lora.presets."red\\u001b[31m"]\nT = 4\n', "preset names are lower-case"),
])
def test_try_odd_configs(tmp_path, config, fragment):
    (tmp_path / "gates.toml").write_text(config)
    assert_usage_error(run_in_process("show", "lora", cwd=tmp_path), fragment)


def test_try_sighup_is_a_clean_interruption_with_exit_129(tmp_path):
    code, err = _stop_mid_run(tmp_path, [*LONG_POOL_RUN, "--set", "executor=process"], signal.SIGHUP, group=True)
    assert code == 129
    assert err == ["nxgates: terminated (SIGHUP); writing the reports of finished gates"]


@pytest.mark.parametrize("option", ["--json", "--junit", "--config", "--save-grads", "--compare-grads"])
def test_try_an_empty_path_is_named_as_such(tmp_path, option):
    runner = run if option == "--json" else run_in_process
    assert_usage_error(runner("run", "parallel-grad", option, "", cwd=tmp_path), f"{option}: empty path")


def test_try_a_deleted_working_directory(tmp_path):
    (tmp_path / "gone").mkdir()
    r = shell('cd gone && rmdir ../gone && "$NX" run lora --json r.json', tmp_path)
    assert r.returncode == 2 and r.stderr == "nxgates: error: --json r.json: cannot resolve the path: " \
                                             "No such file or directory\n"


def test_try_an_address_space_limit_is_part_of_the_memory_budget(tmp_path):
    """`ulimit -v`: refused up front (exit 2), not a MemoryError mid-run (was exit 3, internal error)."""
    r = shell('ulimit -v 330000 && "$NX" run parallel-grad --preset large', tmp_path)  # well below what large needs
    assert_usage_error(r, "parallel-grad at D=784", "memory budget")


def test_try_too_few_file_descriptors_for_the_process_pool(tmp_path):
    """`ulimit -n 16`: the pool's pipes cannot be made; exit 2 naming the limit (was exit 3, internal error)."""
    r = shell('ulimit -n 16 && "$NX" run parallel-grad --executor process', tmp_path)
    assert_usage_error(r, "parallel-grad: the system refused a resource: Too many open files", "ulimit -n")


def test_try_a_path_too_long_for_the_system(tmp_path):
    """ENAMETOOLONG from pathlib's is_dir(): was exit 3 (internal error); the echoed path is cut too."""
    r = run("run", "lora", "--json", "a" * 5000, cwd=tmp_path)
    assert_usage_error(r, "cannot write: File name too long")
    assert len(r.stderr) < 1100
