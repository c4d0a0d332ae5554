"""The target checked without ``--target``: nxgates' own f32 per-example gradients, the tape's pass that
parallel-grad runs, as a function of a batch: ``mlp_grads(X=..., T=..., W1=..., W2=...)`` gives one row
``[dW1 row-major, dW2 row-major]`` per row of X and T. Its weights are static; without ``--inputs`` it runs
on the seed's tensors (:func:`nxgates.core.mlp.init_data`), the arrays ``nxgates export parallel-grad``
writes.
"""

from __future__ import annotations

import numpy as np

from nxgates.core.mlp import Dims, init_data
from nxgates.core.mlp import example_grads as _example_grads
from nxgates.core.tape import F32, Tape
from nxgates.errors import ConfigError
from nxgates.gatekit import ParamValue
from nxgates.tensors.mlp_spec import MLP_INPUTS
from nxgates.tensors.read import sizes_of

#: the built-in target's arrays passed whole
STATIC = ("W1", "W2")
#: its SPEC, for lines that name what was checked
SPEC = "nxgates.gates.invariance.builtin:mlp_grads"

#: tapes no call is using, by widths. A call takes one (or makes one) and puts it back when it returns, so
#: concurrent calls never share a tape, as parallel-grad's workers each keep their own, and a tape records
#: its pass once, not once per thread that calls. (``list.pop`` and ``append`` are atomic: no lock, which a
#: forked pool worker could inherit held.)
_spare: dict[Dims, list[Tape]] = {}


def mlp_grads(X: np.ndarray, T: np.ndarray, W1: np.ndarray, W2: np.ndarray) -> np.ndarray:
    """Per-example gradients of the MLP ``x -> W1 -> relu -> W2 -> mse(t)``, one row per row of X."""
    dims = Dims(X.shape[1], W1.shape[0], W2.shape[0])
    spare = _spare.setdefault(dims, [])
    try:
        tape = spare.pop()
    except IndexError:
        tape = Tape(dims.arena)
    w = np.concatenate([W1.reshape(-1), W2.reshape(-1)])
    w1_t = np.ascontiguousarray(W1.T)  # made once per call, as parallel-grad makes it once per batch
    out = np.empty((X.shape[0], dims.n_params), F32)
    for b in range(X.shape[0]):
        _example_grads(tape, dims, w, X[b], T[b], out[b], w1_t=w1_t)
    spare.append(tape)  # not after a call that raised: a pass stopped half way leaves its tape to be dropped
    return out


def seed_arrays(params: dict[str, ParamValue]) -> dict[str, np.ndarray]:
    """The built-in target's batch at the gate's sizes: the seed's weights, inputs and targets."""
    dims = Dims.of(params)
    w, x, t = init_data(dims, int(params["B"]))
    return {"W1": w[: dims.n_w1].reshape(dims.H, dims.D), "W2": w[dims.n_w1 :].reshape(dims.O, dims.H),
            "X": x, "T": t}


def check_given(arrays: dict[str, np.ndarray], where: str) -> None:
    """``--inputs`` for the built-in target: the MLP's four float32 arrays, their shapes agreeing."""
    names = sorted(arrays)
    if names != sorted(a.name for a in MLP_INPUTS.arrays):
        raise ConfigError(f"{where}: the built-in target takes arrays W1, W2, X, T (as `nxgates export "
                          f"parallel-grad` writes), not {', '.join(names)}; or give --target")
    for a in MLP_INPUTS.arrays:
        if arrays[a.name].dtype != F32 or arrays[a.name].ndim != len(a.axes):
            raise ConfigError(f"{where}: array {a.name}: the built-in target takes float32 of rank {len(a.axes)}, "
                              f"got {arrays[a.name].dtype} of shape {arrays[a.name].shape}")
    sizes_of(where, MLP_INPUTS, arrays)
