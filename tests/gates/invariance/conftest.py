import importlib.util
from pathlib import Path

import numpy as np
import pytest

from nxgates import registry

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "invariance"


@pytest.fixture(scope="session")
def entry():
    """The packaged registry's invariance gate, as ``nxgates run`` resolves it."""
    return registry.load(registry.PACKAGED_CONFIG).gates["invariance"]


@pytest.fixture(scope="session")
def make_inputs():
    """examples/invariance/make_inputs.py, loaded from its file."""
    spec = importlib.util.spec_from_file_location("invariance_make_inputs", EXAMPLES / "make_inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def mlp_arrays():
    """A small batch for the row-loop MLP: X (16, 12), W1 (8, 12), b1 (8,), W2 (3, 8), b2 (3,)."""
    rng = np.random.default_rng(7)
    return {"X": rng.standard_normal((16, 12), np.float32), "W1": rng.standard_normal((8, 12), np.float32),
            "b1": rng.standard_normal(8, np.float32), "W2": rng.standard_normal((3, 8), np.float32),
            "b2": rng.standard_normal(3, np.float32)}
