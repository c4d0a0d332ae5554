import os
import shutil
from pathlib import Path

import pytest

STANDIN = Path(__file__).parent / "standin_gate.py"


@pytest.fixture
def standin_site(tmp_path, monkeypatch):
    """The stand-in gate 'installed' as plugin gate ``standin``: its module and a .dist-info on sys.path."""
    site = tmp_path / "site"
    info = site / "standin_gates-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: standin-gates\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[nxgates.gates]\nstandin = nxgates_standin_gate\n")
    shutil.copy(STANDIN, site / "nxgates_standin_gate.py")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("NXGATES_STANDIN_MOVE", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return site
