import os

import pytest
from click.testing import CliRunner


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing of nxgates' stays in /dev/shm after the tests: a file this process made and did not remove fails
    the run; those of processes that are gone (runs the tests killed) are reclaimed, as the next run would."""
    from nxgates.core.pool.shm import owned_files, reclaim_stale

    reclaim_stale()
    left = owned_files(os.getpid())
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"left in /dev/shm by this test run: {', '.join(left)}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        else:
            print(message)
