"""The built-in LoRA model's input and gradient declarations (nxgates/tensors/lora_spec.py): the arrays they
make, the values they admit, and another implementation's LoRA gradients read in the shapes of the run."""

import numpy as np
import pytest

from nxgates.core import lora
from nxgates.errors import ConfigError
from nxgates.tensors import lora_spec
from nxgates.tensors.lora_spec import LORA_GRADS, LORA_INPUTS, lora_model, read_foreign_grads

P = {"T": 2, "DM": 4, "R": 2}


def test_the_lora_arrays_are_the_seeds_initial_model():
    got = LORA_INPUTS.make({k: np.int64(v) for k, v in P.items()})
    m = lora.init_model(2, 4, 2)
    assert list(got) == ["x", "W", "A", "B"]
    for k in got:
        np.testing.assert_array_equal(got[k], getattr(m, k))
    assert got["x"].shape == (2, 4) and got["W"].shape == (4, 4)
    assert got["A"].shape == (4, 2) and got["B"].shape == (2, 4)


def test_a_model_of_given_arrays_is_a_copy_in_the_models_order():
    arrays = LORA_INPUTS.make(P)
    m = lora_model(arrays)
    for k in ("x", "W", "A", "B"):
        np.testing.assert_array_equal(getattr(m, k), arrays[k])
        assert not np.shares_memory(getattr(m, k), arrays[k])
    m.W[0, 0] += 1
    assert arrays["W"][0, 0] != m.W[0, 0]


def test_the_seeds_values_are_admitted_and_values_past_the_overflow_guards_refused_as_the_guard_names_them():
    seed = LORA_INPUTS.make(P)
    assert LORA_INPUTS.admit(seed, P) is None  # admitted: no refusal
    arrays = {**seed, "x": np.full((2, 4), 1 << 40, np.int64)}
    with pytest.raises(ConfigError) as exc:
        LORA_INPUTS.admit(arrays, P)
    assert str(exc.value) == ("arrays x, W, A, B: int64 overflow guard tripped in L = sum y^2 (|value| could reach "
                              "1.09e+24 >= 2^63 (less a margin))")


def test_values_past_a_guard_of_the_backward_pass_are_refused():
    """A = 0 keeps the forward pass small whatever B is; the backward's dy B^T is not."""
    big = {"x": np.full((2, 4), 1 << 20, np.int64), "W": np.full((4, 4), 1 << 20, np.int64),
           "A": np.zeros((4, 2), np.int64), "B": np.full((2, 4), 1 << 50, np.int64)}
    assert lora.forward(lora_model(big)).loss == 1 << 47
    with pytest.raises(ConfigError) as exc:
        LORA_INPUTS.admit(big, P)
    assert str(exc.value) == ("arrays x, W, A, B: int64 overflow guard tripped in dh = dy B^T (|value| could reach "
                              "3.78e+22 >= 2^62)")


def test_the_lora_gradients_of_the_seed():
    got = LORA_GRADS.make(P)
    m = lora.init_model(2, 4, 2)
    dA, dB = lora.backward(m, lora.forward(m))
    assert list(got) == ["dA", "dB"]
    np.testing.assert_array_equal(got["dA"], dA)
    np.testing.assert_array_equal(got["dB"], dB)
    assert lora_spec._lora_grads({k: np.int64(v) for k, v in P.items()})["dB"].shape == (2, 4)


def test_foreign_gradients_from_an_npz(tmp_path):
    grads = LORA_GRADS.make(P)
    path = str(tmp_path / "g.npz")
    np.savez(path, **grads)
    got = read_foreign_grads(path, P)
    assert list(got) == ["dA", "dB"]
    np.testing.assert_array_equal(got["dA"], grads["dA"])


def test_foreign_gradients_in_another_shape_are_refused(tmp_path):
    grads = LORA_GRADS.make(P)
    path = str(tmp_path / "g.npz")
    np.savez(path, dA=grads["dA"][:3], dB=grads["dB"])
    with pytest.raises(ConfigError) as exc:
        read_foreign_grads(path, P)
    assert str(exc.value) == f"--compare-grads {path}: array dA: shape (3, 2), expected (4, 2) at DM=4 R=2"
    np.savez(path, dA=grads["dA"], dB=grads["dB"].T.copy())
    with pytest.raises(ConfigError) as exc:
        read_foreign_grads(path, P)
    assert str(exc.value) == f"--compare-grads {path}: array dB: shape (4, 2), expected (2, 4) at DM=4 R=2"


def test_foreign_gradients_are_named_with_their_flag(tmp_path):
    path = str(tmp_path / "g.npz")
    np.savez(path, dA=LORA_GRADS.make(P)["dA"])
    with pytest.raises(ConfigError) as exc:
        read_foreign_grads(path, P)
    assert str(exc.value) == f"--compare-grads {path}: missing array dB (member dB.npy); the gate's arrays are dA, dB"


def test_foreign_gradients_from_raw_dumps(tmp_path):
    grads = LORA_GRADS.make(P)
    for k, v in grads.items():
        v.astype("<i8").tofile(tmp_path / f"{k}.bin")
    got = read_foreign_grads(str(tmp_path), P)
    np.testing.assert_array_equal(got["dB"], grads["dB"])
    (tmp_path / "dB.bin").write_bytes(b"\0" * 8)
    with pytest.raises(ConfigError) as exc:
        read_foreign_grads(str(tmp_path), P)
    assert str(exc.value) == (f"--compare-grads {tmp_path}: array dB: dB.bin has 8 bytes, expected 64 "
                              f"(int64 of shape (R=2, DM=4))")
