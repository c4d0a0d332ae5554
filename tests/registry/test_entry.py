"""A gate of the registry (nxgates/registry/entry.py): its table completed by the gate's own declarations."""

from nxgates import registry


def test_a_gates_toml_written_before_workers_existed_still_loads():
    """A parameter added after a gates.toml was written takes the gate's own default."""
    reg = registry.parse('[gates.lora]\nmodule = "lora"\ndescription = "old"\n'
                         "params = { T = 3, DM = 6, R = 2, delta = 2097, tol_permil = 70, algorithm = 'fast' }\n",
                         "old.toml")
    assert reg.resolve("lora").defaults["workers"] == 0
