"""The registry's parameters (nxgates/registry/params.py): every packaged gate offers the same preset ladder,
and each preset's values come out typed, range-checked and memory-estimated, so `nxgates run all --preset NAME`
works for each."""

from importlib import resources

import pytest

from nxgates import registry


@pytest.mark.parametrize("preset", ["seed", "medium", "large", "xl"])
def test_every_gate_has_the_preset_and_its_values_validate(preset):
    reg = registry.parse(resources.files("nxgates").joinpath("gates.toml").read_text(), "packaged")
    entries = reg.select(["all"])
    params = registry.effective_params(entries, preset, ())  # typed, range-checked, memory-estimated
    assert set(params) == {"lora", "parallel-grad", "ta-gradcheck", "lora-train", "dp-train", "invariance"}
