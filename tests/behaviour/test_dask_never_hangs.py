"""Dask never hangs, never runs away, never sprays tracebacks. An address that accepts TCP
but is not a Dask scheduler is exit 2 with one line within the connect limit (by option or by
``NXGATES_DASK_SCHEDULER``); a worker count past the cap is exit 2 before any worker starts; a stopped Dask
run ends with its one line, no ``distributed`` traceback, and no scratch directory left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.behaviour.from_outside import SCRIPT, Done, assert_one_line_error, kill_group, needs_dask

pytestmark = needs_dask

HTTP_REPLY = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad request"
NOT_A_SCHEDULER = {  # case -> (what the listener answers, the gate, whether the address comes by environment)
    "silent-parallel-grad": (None, "parallel-grad", False),
    "silent-lora": (None, "lora", False),
    "silent-dp-train": (None, "dp-train", False),
    "http-parallel-grad": (HTTP_REPLY, "parallel-grad", False),
    "http-dp-train": (HTTP_REPLY, "dp-train", False),
    "silent-by-environment": (None, "parallel-grad", True),
}
MUST_END_WITHIN = 15  # the 8 s connect limit, with room for start-up on a busy machine
WAIT_AT_MOST = 20


@pytest.fixture(scope="module")
def not_a_scheduler_runs(fake_scheduler, tmp_path_factory) -> dict[str, tuple[str, Done | None]]:
    """Every case at once (each would wait its whole limit alone): case -> (address, what the command did,
    or None if it was still running after WAIT_AT_MOST seconds and was killed)."""
    started = {}
    for case, (reply, gate, by_env) in NOT_A_SCHEDULER.items():
        address = fake_scheduler(reply)
        cwd = tmp_path_factory.mktemp(case)
        env = {**os.environ}
        if by_env:
            env["NXGATES_DASK_SCHEDULER"] = address
            args = ["run", gate, "--executor", "dask", "--timeout", "10"]
        else:
            env.pop("NXGATES_DASK_SCHEDULER", None)
            args = ["run", gate, "--scheduler", address, "--timeout", "10"]
        proc = subprocess.Popen([SCRIPT, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        started[case] = (address, proc, time.monotonic())
    results = {}
    deadline = time.monotonic() + WAIT_AT_MOST
    for case, (address, proc, start) in started.items():
        try:
            out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results[case] = (address, Done(proc.returncode, out, err, time.monotonic() - start))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            results[case] = (address, None)
    return results


@pytest.mark.parametrize("case", sorted(NOT_A_SCHEDULER))
def test_an_address_that_is_not_a_scheduler_is_exit_2_in_time(not_a_scheduler_runs, case):
    address, r = not_a_scheduler_runs[case]
    assert r is not None, f"still running after {WAIT_AT_MOST} s"
    assert r.seconds < MUST_END_WITHIN, r.seconds
    assert_one_line_error(r, address)


# ---- 8. a cap on Dask workers, and quiet stops ------------------------------------------------------------


@pytest.mark.parametrize("workers", [32, 1023])
def test_a_dask_worker_count_past_the_cap_is_refused_at_once(tmp_path, workers):
    if 8 * (os.cpu_count() or 1) >= workers:
        pytest.skip(f"this machine would allow {workers} workers")
    # 10 s, not the 60 s such a run may take to fail: without a cap it starts dozens of workers in 10 s.
    proc = subprocess.Popen([SCRIPT, "run", "parallel-grad", "--executor", "dask", "--set", f"workers={workers}"],
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"workers={workers} on Dask was still running after 10 s")
    assert_one_line_error(Done(proc.returncode, out, err, time.monotonic() - start), f"workers={workers}")


LONG_DASK_RUN = ["run", "parallel-grad", "--executor", "dask", "--set", "workers=2", "--repeat", "10000",
                 "--timeout", "120", "--json", "r.json"]


def stop_a_dask_run(tmp_path: Path, how: signal.Signals | None) -> tuple[Done, list[str]]:
    """Start a long Dask run with its own temp dir, wait until its workers made their scratch space, then
    send ``how`` (None: let ``--timeout`` stop it). Returns what it did and what it left in the temp dir."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = LONG_DASK_RUN if how is not None else [*LONG_DASK_RUN[:-4], "--timeout", "12"]
    proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path, env={**os.environ, "TMPDIR": str(temp)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    start = time.monotonic()
    try:
        while how is not None and not any(temp.iterdir()):
            if time.monotonic() - start > 40 or proc.poll() is not None:
                pytest.fail("the Dask run did not start its workers")
            time.sleep(0.2)
        if how is not None:
            time.sleep(2)  # the cluster is up and the gate at work
            proc.send_signal(how)
        out, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail("the Dask run did not end")
    time.sleep(1)
    return Done(proc.returncode, out, err, time.monotonic() - start), sorted(p.name for p in temp.iterdir())


STOPPED = {signal.SIGTERM: (143, "nxgates: terminated (SIGTERM)"), signal.SIGINT: (130, "nxgates: interrupted")}


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_dask_run_is_one_line_and_leaves_nothing(tmp_path, how):
    r, left = stop_a_dask_run(tmp_path, how)
    code, start = STOPPED[how]
    lines = r.stderr.splitlines()
    assert r.returncode == code and len(lines) == 1 and lines[0].startswith(start), (r.returncode, r.stderr[-3000:])
    assert left == [], left


def test_a_dask_run_past_its_timeout_is_quiet(tmp_path):
    r, left = stop_a_dask_run(tmp_path, None)
    assert r.returncode == 1 and "timed out" in r.stdout, (r.returncode, r.stdout[-1000:])
    assert r.stderr == "" and left == [], (r.stderr[-3000:], left)
