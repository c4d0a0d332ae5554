"""The f32 MLP's input declaration: ``W1, W2, X, T`` (parallel-grad, ta-gradcheck, dp-train)."""

from __future__ import annotations

from typing import Any

from nxgates.core.mlp import Dims, init_data
from nxgates.gatekit import InputArray, InputSpec, ParamValue


def _mlp_arrays(params: dict[str, ParamValue]) -> dict[str, Any]:
    dims = Dims.of(params)
    w, x, t = init_data(dims, int(params["B"]))
    return {"W1": w[: dims.n_w1].reshape(dims.H, dims.D), "W2": w[dims.n_w1 :].reshape(dims.O, dims.H),
            "X": x, "T": t}


#: parallel-grad, ta-gradcheck and dp-train: the MLP's weights and a batch of inputs and targets
MLP_INPUTS = InputSpec(
    arrays=(
        InputArray("W1", "float32", ("H", "D"), "first layer's weights"),
        InputArray("W2", "float32", ("O", "H"), "second layer's weights"),
        InputArray("X", "float32", ("B", "D"), "one input per example"),
        InputArray("T", "float32", ("B", "O"), "one target per example"),
    ),
    make=_mlp_arrays,
)
