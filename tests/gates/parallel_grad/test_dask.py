"""parallel-grad on Dask: the same bits as the local executors, the faults caught, a lost worker survived,
and the path a user with a cluster takes (`dask scheduler`, `dask worker`, the console script)."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from nxgates.core import chunks
from nxgates.core.mlp import Dims
from nxgates.core.pool import dask as dask_pool
from nxgates.core.pool.dask import cluster as dask_cluster
from nxgates.gates import parallel_grad as pg
from nxgates.gates.parallel_grad import job as pg_job
from nxgates.gates.parallel_grad import stream as pg_stream
from tests.helpers import ctx

pytest.importorskip("distributed")

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 2, "executor": "dask"}
BIN = Path(sys.executable).parent
KILL_MARKER = "NXGATES_TEST_KILL_MARKER"
REAL_RUN_TASK = pg_job.run_task


@pytest.fixture
def cluster(dask_scheduler):
    return dask_scheduler(2)


@pytest.fixture
def lent_cluster(cluster, monkeypatch):
    """Pools given no address borrow the session's LocalCluster, as a selftest session lends one to its runs
    (``session_cluster``; ``distributed.Client`` joins it by its address as it joins the cluster itself): the
    gate's path on a cluster of its own (workers on this host, rows in host memory), with none started for the
    test. The gate starting and stopping one of its own: the lost-worker tests below."""
    def no_cluster_of_its_own(*args):
        raise AssertionError("started a LocalCluster though the session lends one")

    monkeypatch.setattr(dask_pool, "local_cluster", no_cluster_of_its_own)
    monkeypatch.setattr(dask_cluster, "local_cluster", no_cluster_of_its_own)
    session = {"cluster": cluster, "workers": SEED["workers"]}
    dask_cluster.SESSIONS.append(session)
    yield cluster
    dask_cluster.SESSIONS.remove(session)


def by_name(out):
    return {c.name: c.passed for c in out.checks}


def digest(params, **options):
    out = pg.run(ctx(params, **options))
    assert all(by_name(out).values()), by_name(out)
    return out.digest


@pytest.mark.parametrize("sizes", [{}, {"D": 5, "H": 7, "O": 3, "B": 6}, {"D": 256, "H": 128, "O": 10, "B": 64}],
                         ids=["seed", "odd", "medium"])
def test_dask_gives_the_bits_of_thread_and_process(cluster, sizes):
    params = {**SEED, **sizes}
    digests = {e: digest({**params, "executor": e}) for e in ("thread", "process")}
    digests["dask"] = digest(params, scheduler=cluster)
    assert len(set(digests.values())) == 1, digests


def test_metrics_name_the_scheduler_and_the_tasks_each_worker_ran(cluster):
    out = pg.run(ctx(SEED, scheduler=cluster))
    m = out.metrics
    assert m["executor"] == "dask" and m["scheduler"] == cluster
    assert sorted(m["tasks_per_worker"].values()) == [4, 4] and all(a.startswith("tcp://127.0.0.1:")
                                                                    for a in m["tasks_per_worker"])
    assert (m["distinct_workers"], m["workers_lost"], m["tasks_rerun"]) == (2, [], 0)
    assert pg.run(ctx({**SEED, "executor": "thread"})).metrics["tasks_per_worker"] == {"0": 4, "1": 4}


def test_auto_executor_takes_dask_when_given_a_scheduler(cluster):
    out = pg.run(ctx({**SEED, "executor": "auto"}, scheduler=cluster))
    assert out.metrics["executor"] == "dask" and all(by_name(out).values())


@pytest.mark.parametrize("fault", list(pg.FAULTS))
def test_every_fault_is_caught_on_dask_by_its_check(cluster, fault):
    expected = set(pg.FAULTS[fault].caught_by)
    for _ in range(3):
        out = pg.run(ctx(SEED, fault, scheduler=cluster))
        failed = {name for name, ok in by_name(out).items() if not ok}
        assert failed >= expected, failed


def run_task_killing_worker_1(task, worker):
    """run_task, except that the first time worker 1 starts an example of the first parallel pass, its
    worker process dies (once: the marker file is created exclusively)."""
    if worker == 1 and task.output == 0:
        try:
            os.close(os.open(os.environ[KILL_MARKER], os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            pass
        else:
            os._exit(1)
    return REAL_RUN_TASK(task, worker)


@pytest.mark.parametrize("workers", [3, 2])
def test_a_worker_lost_mid_pass_is_rerun_elsewhere_with_the_same_bits(tmp_path, monkeypatch, workers):
    expected = digest({**SEED, "executor": "thread"})
    monkeypatch.setenv(KILL_MARKER, str(tmp_path / "killed"))  # before the gate's LocalCluster spawns its workers
    monkeypatch.setattr(pg_stream, "run_task", run_task_killing_worker_1)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = pg.run(ctx({**SEED, "workers": workers}))
    assert (tmp_path / "killed").exists()
    # the LocalCluster is gone, the replacement the nanny started for the killed worker too (multiprocessing's
    # resource tracker stays: it serves this process and ends with it)
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())]
    m = out.metrics
    lost = [i.text for i in out.items if "worker(s) lost" in getattr(i, "text", "")]
    assert len(m["workers_lost"]) == 1 and lost == [f" dask: 1 worker(s) lost ({m['workers_lost'][0]}); "
                                                    f"{m['tasks_rerun']} task(s) re-run on other workers"]
    assert m["tasks_rerun"] == len(range(1, 8, workers))  # every example dealt to worker 1
    assert out.digest == expected
    checks = by_name(out)
    assert checks[pg.T1] and checks[pg.T3] and m["tasks_completed"] == 8
    assert m["rows"] == "shared memory"  # the workers of a cluster of its own map the gate's rows
    if workers == 3:
        assert checks[pg.T2] and m["distinct_workers"] == 2
    else:  # one worker left: parallelism not shown, and T2 says why
        (t2,) = [c for c in out.checks if c.name == pg.T2]
        assert not t2.passed and "all tasks ran on 1 worker of 2" in t2.detail and "1 worker(s) lost" in t2.detail


def _written_address(sched_file, seconds: float) -> str:
    """The address in the scheduler's file once it is whole: the file appears before its JSON is written."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return json.loads(sched_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.console_script
def test_console_script_on_a_real_dask_scheduler_and_two_workers(tmp_path):
    """The user's path: `dask scheduler`, two `dask worker ADDRESS`, `nxgates run --scheduler ADDRESS`."""
    sched_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")  # noqa: SIM115 (closed in finally)
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sched_file)], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))
        address = _written_address(sched_file, 30)
        for _ in range(2):
            procs.append(subprocess.Popen(
                [str(BIN / "dask"), "worker", address, "--nthreads", "1", "--nworkers", "1", "--host", "127.0.0.1",
                 "--no-dashboard", "--no-nanny"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))
        script = shutil.which("nxgates", path=str(BIN))
        # workers=2 makes nxgates wait (bounded) until both workers joined the scheduler
        r = subprocess.run([script, "run", "parallel-grad", "--set", "workers=2", "--scheduler", address,
                            "--json", "-"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert r.returncode == 0, r.stderr
        m = json.loads(r.stdout)["gates"][0]["metrics"]
        assert m["scheduler"] == address and m["distinct_workers"] == 2 and m["executor"] == "dask"
        assert m["grads_sha256"] == digest({**SEED, "executor": "thread"})
        env = {**os.environ, dask_pool.SCHEDULER_ENV: address}
        r = subprocess.run([script, "run", "parallel-grad", "--executor", "dask", "--inject", "shared-arena"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
        assert r.returncode == 1 and f" FAIL {pg.T1}" in r.stdout, r.stdout + r.stderr
    finally:
        # the workers, then the scheduler: a worker stopped as its scheduler stops can hang in its close
        for stopping in (procs[1:], procs[:1]):
            for p in stopping:
                p.terminate()
            for p in stopping:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        log.close()


@pytest.mark.console_script
def test_unreachable_scheduler_through_the_console_script(tmp_path):
    script = shutil.which("nxgates", path=str(BIN))
    r = subprocess.run([script, "run", "parallel-grad", "--scheduler", "tcp//no-such-host"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=30)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "tcp//no-such-host" in r.stderr and "Traceback" not in r.stderr


def tagged_processes(tag):
    """Live processes started with NXGATES_TEST_TAG=tag in their environment (the run and its workers)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("NXGATES_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, OSError):
            pass
    return found


@pytest.mark.console_script
def test_ctrl_c_and_timeout_leave_no_worker_process_behind(tmp_path):
    import signal
    import uuid

    from nxgates.core.pool.shm import owned_files

    script = shutil.which("nxgates", path=str(BIN))
    tag = uuid.uuid4().hex
    env = {**os.environ, "NXGATES_TEST_TAG": tag}
    # Ctrl-C while the LocalCluster starts (its first worker process is up), then while the gate runs (its rows
    # are mapped in /dev/shm)
    for ready in (lambda proc: len(tagged_processes(tag)) >= 2, lambda proc: bool(owned_files(proc.pid))):
        proc = subprocess.Popen([script, "run", "parallel-grad", "--executor", "dask", "--preset", "medium",
                                 "--repeat", "3"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not ready(proc) and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 130, err
        assert err.splitlines()[-1] == "nxgates: interrupted; writing the reports of finished gates", err
        assert "Traceback" not in err and "leaked" not in err
        psutil.wait_procs(tagged_processes(tag), timeout=10)
        assert tagged_processes(tag) == []

    r = subprocess.run([script, "run", "parallel-grad", "--executor", "dask", "--preset", "medium", "--timeout",
                        "0.5"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "RED -- timed out after 0.5 s" in r.stdout, r.stdout + r.stderr
    psutil.wait_procs(tagged_processes(tag), timeout=10)
    assert tagged_processes(tag) == []


def test_own_cluster_workers_write_rows_into_host_memory_others_return_them(lent_cluster):
    """Our LocalCluster's workers map the gate's rows (no 200 MB per pass over TCP at large); a cluster
    reached by address may be elsewhere, so its rows travel back. Both give the local executors' bits."""
    expected = digest({**SEED, "executor": "thread"})
    own = pg.run(ctx(SEED))
    assert own.metrics["rows"] == "shared memory" and own.digest == expected and all(by_name(own).values())
    remote = pg.run(ctx(SEED, scheduler=lent_cluster))
    assert remote.metrics["rows"] == "returned" and remote.digest == expected and all(by_name(remote).values())


@pytest.mark.parametrize("where", ["own cluster", "by address"])
def test_dask_streams_the_batch_in_chunks_with_the_same_bits(lent_cluster, monkeypatch, where):
    """A batch of many chunks on Dask: the cluster's copy of the job is made once, so the tasks of later
    chunks make their inputs from the example's index; rows land in host memory (own cluster) or travel
    back (by address). Same digest as the process executor, every check green, memory planned per chunk."""
    params = {**SEED, "D": 5, "H": 7, "O": 3, "B": 13}
    expected = digest({**params, "executor": "process"})
    monkeypatch.setattr(chunks, "REMOTE_CHUNK_BYTES", 1)  # a chunk is one round of the workers: 7 chunks
    options = {} if where == "own cluster" else {"scheduler": lent_cluster}
    out = pg.run(ctx(params, **options))
    assert out.metrics["chunk_examples"] == 2 and out.digest == expected and all(by_name(out).values())
    assert out.metrics["tasks_completed"] == 13 and sorted(out.metrics["tasks_per_worker"].values()) == [6, 7]


def test_a_late_chunks_fault_is_caught_on_dask(cluster, monkeypatch):
    monkeypatch.setattr(chunks, "REMOTE_CHUNK_BYTES", 1)
    for fault, check in (("nondeterministic", pg.T3), ("drop-task", pg.T2), ("single-worker", pg.T2)):
        out = pg.run(ctx({**SEED, "B": 9}, fault, scheduler=cluster))
        assert by_name(out)[check] is False, fault


def test_dask_memory_is_planned_per_chunk_not_per_batch():
    large = Dims(784, 256, 10)
    assert pg.footprint_bytes(large, 2, 1 << 20, remote=True) == pg.footprint_bytes(large, 2, 4096, remote=True)
    assert chunks.chunk_examples(large.n_params, 2, 256, remote=True) == 256  # large's batch: one round trip a pass
    pg.validate({**SEED, "D": 784, "H": 256, "O": 10, "B": 1 << 20})  # a million examples: streamed, not refused
