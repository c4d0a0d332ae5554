"""The keys and labels that name a gate run in a baseline (nxgates/baseline/keys.py): how a gate computes is
left out, the sizes and what differs from the defaults shown, and a run on the user's tensors keyed by their
digest, so other tensors never match it."""

import json

import numpy as np

from nxgates.baseline.keys import entry_key, keyed_params, label, shown_params


def test_the_key_leaves_out_how_a_gate_computes_and_sorts_the_rest():
    params = {"T": 3, "DM": 6, "executor": "thread", "workers": 4, "algorithm": "fast"}
    assert keyed_params(params) == {"T": 3, "DM": 6, "algorithm": "fast"}
    assert entry_key("lora", params) == "lora[DM=6 T=3 algorithm=fast]"
    assert entry_key("lora", {**params, "executor": "process"}) == entry_key("lora", params)
    assert entry_key("lora", params, "ab12") == "lora[DM=6 T=3 algorithm=fast] inputs=ab12"


def test_a_label_shows_the_sizes_and_what_differs_from_the_defaults():
    declared = ["T", "DM", "R", "delta", "tol_permil", "algorithm", "workers", "executor"]
    defaults = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast", "workers": 0,
                "executor": "auto"}
    presets = {"seed": {}, "medium": {"T": 8, "DM": 96, "R": 4}}
    at_defaults = shown_params(declared, defaults, presets, defaults)
    assert label("lora", defaults, at_defaults) == "lora[T=3 DM=6 R=2]"
    changed = {**defaults, "delta": 100, "workers": 3}
    assert label("lora", changed, shown_params(declared, defaults, presets, changed)) == "lora[T=3 DM=6 R=2 delta=100]"
    assert shown_params(declared, defaults, {"seed": {}}, defaults) is None  # no presets: every keyed param
    assert label("g", {"N": 1, "executor": "x"}) == "g[N=1]" and label("g", {"workers": 2}) == "g"


def test_a_run_on_inputs_is_keyed_by_them(invoke, tmp_path):
    assert invoke("export", "lora", "--out", "x.npz").exit_code == 0
    r = invoke("run", "lora", "--inputs", "x.npz", "--update-baseline", "b.json", "--json", "r.json")
    assert r.exit_code == 0, r.output
    digest = json.loads((tmp_path / "r.json").read_text())["gates"][0]["metrics"]["inputs_sha256"]
    (key,) = json.loads((tmp_path / "b.json").read_text())["entries"]
    assert key.endswith(f" inputs={digest}")
    assert invoke("run", "lora", "--inputs", "x.npz", "--baseline", "b.json").exit_code == 0

    with np.load(tmp_path / "x.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["A"] = arrays["A"] + 1
    np.savez(tmp_path / "y.npz", **arrays)
    other = invoke("run", "lora", "--inputs", "y.npz", "--baseline", "b.json")
    assert other.exit_code == 1, other.output  # no entry for these tensors: --baseline-missing fail
    assert " FAIL baseline" in other.output and "PASS gradcheck A" in other.output
    assert invoke("run", "lora", "--baseline", "b.json").exit_code == 1  # nor for the seed's own
