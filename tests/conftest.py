import pytest

from nxgates.gatekit import RunContext


@pytest.fixture
def lora_params():
    """The seed's defaults, as gates.toml ships them."""
    return {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def ctx(params, fault=None, **options):
    return RunContext(params=dict(params), fault=fault, options=options)
