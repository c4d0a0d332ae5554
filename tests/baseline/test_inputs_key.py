"""A baseline of a run on the user's tensors is keyed by their digest: other tensors never match it."""

import json

import numpy as np

from nxgates.tensors.read import arrays_digest


def test_the_digest_names_every_array_by_name_dtype_shape_and_bytes():
    a = {"x": np.arange(6, dtype=np.int64).reshape(2, 3), "W": np.ones((3, 3), np.int64)}
    same = {"W": np.ones((3, 3), np.int64), "x": np.arange(6, dtype=np.int64).reshape(2, 3)}
    assert arrays_digest(a) == arrays_digest(same)  # order of the mapping does not matter
    assert arrays_digest(a) != arrays_digest({**a, "x": a["x"].reshape(3, 2)})  # the shape does
    assert arrays_digest(a) != arrays_digest({**a, "x": a["x"].astype(np.int32)})  # the dtype does
    assert arrays_digest(a) != arrays_digest({"y": a["x"], "W": a["W"]})  # the names do
    moved = a["x"].copy()
    moved[1, 2] += 1
    assert arrays_digest(a) != arrays_digest({**a, "x": moved})
    big = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in a.items()}
    assert arrays_digest(a) == arrays_digest(big)  # the values, not their byte order in the file


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
