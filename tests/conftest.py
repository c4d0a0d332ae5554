import pytest

from tests.helpers import ctx  # noqa: F401  (test modules import it from here or from tests.helpers)


@pytest.fixture
def lora_params():
    """The seed's defaults, as gates.toml ships them."""
    return {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}
