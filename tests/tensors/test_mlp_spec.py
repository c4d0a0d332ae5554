"""The built-in MLP's input declaration (nxgates/tensors/mlp_spec.py): the arrays it makes are the seed's
weights and batch in their shapes."""

import numpy as np

from nxgates.core.mlp import Dims, init_data
from nxgates.tensors import mlp_spec
from nxgates.tensors.mlp_spec import MLP_INPUTS


def test_the_mlp_arrays_are_the_seeds_weights_and_batch_in_their_shapes():
    params = {"D": 3, "H": 2, "O": 4, "B": 5}
    got = MLP_INPUTS.make(params)
    assert list(got) == ["W1", "W2", "X", "T"]
    assert {k: v.shape for k, v in got.items()} == {"W1": (2, 3), "W2": (4, 2), "X": (5, 3), "T": (5, 4)}
    w, x, t = init_data(Dims(3, 2, 4), 5)
    np.testing.assert_array_equal(got["W1"].reshape(-1), w[:6])
    np.testing.assert_array_equal(got["W2"].reshape(-1), w[6:])
    np.testing.assert_array_equal(got["X"], x)
    np.testing.assert_array_equal(got["T"], t)
    assert all(v.dtype == np.float32 for v in got.values())
    assert mlp_spec._mlp_arrays(params)["W1"][0, 0] == got["W1"][0, 0]


def test_the_mlp_batch_size_comes_from_its_parameter_as_an_integer():
    got = MLP_INPUTS.make({"D": 2, "H": 1, "O": 1, "B": np.int64(3)})
    assert got["X"].shape == (3, 2) and got["T"].shape == (3, 1)
