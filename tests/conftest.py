import os
import signal

import pytest
from click.testing import CliRunner

# which tests share an xdist worker, and the /dev/shm check across workers (tests/_xdist.py)
pytest_plugins = ["tests._xdist"]

# A suite started with SIGINT ignored (``pytest &`` from a script) would pass that on to every process it starts,
# across exec, and the Ctrl-C tests would find nxgates deaf to it. The default handler is restored at once: pytest
# handles Ctrl-C itself, and the processes it starts (xdist's workers, the commands under test) get the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def lora_params():
    """The seed's defaults, as gates.toml ships them."""
    return {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


@pytest.fixture
def invoke(tmp_path, monkeypatch):
    """Run the CLI in-process from an empty directory (so the packaged gates.toml is the registry)."""
    from nxgates.cli import cli

    monkeypatch.chdir(tmp_path)

    def _invoke(*args):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return _invoke


@pytest.fixture
def cache(tmp_path):
    """A parse cache of the test's own for the packaged gates.toml (nxgates/tomlcache.py)."""
    return tmp_path / "__pycache__" / "gates.toml.test.marshal"


@pytest.fixture
def writes_bytecode(monkeypatch):
    """As without PYTHONDONTWRITEBYTECODE (which this suite may run under): the registry writes caches."""
    import sys

    monkeypatch.setattr(sys, "dont_write_bytecode", False)


@pytest.fixture(scope="session")
def dask_scheduler():
    """``dask_scheduler(n)``: the address of a LocalCluster of ``n`` single-threaded worker processes, started on
    first use and lent to every test of the session that asks for that size (one start, not one per module);
    stopped, its scratch space removed, at the session's end. Under xdist the modules that start clusters share
    one worker (tests/_xdist.py), so the run starts one cluster of each size. Without distributed, a test that
    calls it is skipped (one that only asks for it, and calls it when Dask is there, runs the rest)."""
    clusters = {}

    def address(n_workers: int = 2) -> str:
        pytest.importorskip("distributed")
        from nxgates.core.pool.dask.cluster import local_cluster

        if n_workers not in clusters:
            clusters[n_workers] = local_cluster(n_workers)
        return clusters[n_workers].scheduler_address

    yield address
    if clusters:
        from nxgates.core.pool.dask.cluster import close_cluster

        for cluster in clusters.values():
            close_cluster(cluster)


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down (pytest's runner), not before
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing of nxgates' stays in /dev/shm after the tests: a file this process made and did not remove fails
    the run; those of processes that are gone (runs the tests killed) are reclaimed, as the next run would.
    Under xdist each worker checks itself and reports to the controller, which fails the run for all of them."""
    from nxgates.core.pool.shm import owned_files, reclaim_stale
    from tests import _xdist

    config = session.config
    reclaim_stale()
    left = owned_files(os.getpid())
    if _xdist.is_worker(config):
        _xdist.report_shm(config, left)  # a worker's exit status is not the run's: the controller judges
        return
    if _xdist.is_controller(config):
        left += _xdist.left_by_workers(config)[1]
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"left in /dev/shm by this test run: {', '.join(left)}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        else:
            print(message)
