"""Stop signals through the console script: Ctrl-C, SIGTERM and SIGHUP stop a run with one line, the
reports of finished gates and the shell's exit code; no traceback from any thread or worker, no stop lost."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.behaviour.from_outside import children_of, cpu_seconds, stop_signals_at_default, wait_for
from tests.helpers import SCRIPT


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


def _inside_the_pool_passes(proc: subprocess.Popen, executor: str) -> None:
    """Wait until the run is inside the pool passes of its repeated gate, however loaded the machine is: with
    forked workers, once one runs (they are forked only there); with threads, once the run has used 0.6 s of
    CPU (its imports take about 0.3 s, and the same work costs the same CPU on a busy machine)."""
    if executor == "process":
        wait_for(proc, lambda: bool(children_of(proc.pid)), "a worker of the run's pool runs")
    else:
        wait_for(proc, lambda: cpu_seconds(proc.pid) >= 0.6, "the run has used 0.6 s of CPU")


def _stop_mid_run(tmp_path, executor, sig, group):
    """Start a long run in its own session, let it work, signal it (its whole group, as a terminal's
    Ctrl-C or ``timeout`` does, or the main process only), and return (exit code, stderr lines)."""
    args = [*LONG_POOL_RUN, "--set", f"executor={executor}"]
    proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=dict(os.environ, PYTHONFAULTHANDLER="1"),
                            preexec_fn=stop_signals_at_default)
    try:
        _inside_the_pool_passes(proc, executor)
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
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, executor):
    code, err = _stop_mid_run(tmp_path, executor, signal.SIGINT, group=True)
    assert code == 130
    assert err == ["nxgates: interrupted; writing the reports of finished gates"]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False


@pytest.mark.parametrize("group", [False, True])
def test_sigterm_is_a_clean_interruption_with_exit_143(tmp_path, group):
    code, err = _stop_mid_run(tmp_path, "process", signal.SIGTERM, group)
    assert code == 143
    assert err == ["nxgates: terminated (SIGTERM); writing the reports of finished gates"]
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] is True


def test_sighup_is_a_clean_interruption_with_exit_129(tmp_path):
    code, err = _stop_mid_run(tmp_path, "process", signal.SIGHUP, group=True)
    assert code == 129
    assert err == ["nxgates: terminated (SIGHUP); writing the reports of finished gates"]


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
    there would leave a run going for its whole --timeout. The stop must arrive, and nothing be printed."""
    python = str(Path(SCRIPT).with_name("python"))
    done = subprocess.run([python, "-c", LOST_IN_A_FINALIZER.replace("{name}", name)], capture_output=True,
                          text=True, timeout=60, preexec_fn=stop_signals_at_default)
    assert (done.stdout.strip(), done.stderr) == (f"stopped {raised}", "")


def test_other_exceptions_in_a_finalizer_are_printed_as_python_prints_them():
    script = ("from nxgates.cli import signals\nsignals.install_stop_handlers()\n"
              "class Box:\n    def __del__(self):\n        raise ValueError('planted')\nBox()\nprint('went on')\n")
    python = str(Path(SCRIPT).with_name("python"))
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout == "went on\n"
    assert "Exception ignored in" in done.stderr and "ValueError: planted" in done.stderr
