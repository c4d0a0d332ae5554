import pytest
from click.testing import CliRunner

from nxgates.cli import cli


@pytest.fixture
def invoke(tmp_path, monkeypatch):
    """Run the CLI in-process from an empty directory (so the packaged gates.toml is the registry)."""
    monkeypatch.chdir(tmp_path)

    def _invoke(*args):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return _invoke
