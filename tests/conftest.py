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
