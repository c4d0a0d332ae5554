"""The parameters several gates declare alike: the MLP's sizes and reduction order (the float32 gates) and
the LoRA model's (lora, lora-train), each declared once, with their cross-checks. The numbers they choose
are the core's; how a user sets them is the gate contract's, so they live here."""

from __future__ import annotations

import nxgates.core.lora.footprint as footprint
import nxgates.core.lora.pooled as pooled
from nxgates.core.mlp import REDUCTIONS
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, IntParam

#: the widest D, H and O a gate accepts unless it says otherwise
MAX_WIDTH = 1 << 20


def mlp_params(batch: IntParam, max_width: int = MAX_WIDTH, max_out: int | None = None, prefix: str = ""
               ) -> dict[str, IntParam]:
    """The MLP's D, H, O parameters and the batch ``B`` (each gate words its batch, and may accept less)."""
    return {
        "D": IntParam(f"{prefix}input width", min=1, max=max_width),
        "H": IntParam(f"{prefix}hidden width", min=1, max=max_width),
        "O": IntParam(f"{prefix}output width", min=1, max=max_width if max_out is None else max_out),
        "B": batch,
    }


#: the f32 gates' ``reduction``: tree (the default, pairwise halving) or a plain loop's left-to-right order
REDUCTION_PARAM = ChoiceParam("the order every sum of the forward, the loss and the backward is taken in: tree "
                              "(pairwise halving) or sequential (left to right, as a plain loop)",
                              tuple(REDUCTIONS), default="tree")

#: the LoRA model's sizes and its gradcheck's step and tolerance
MODEL_PARAMS = {
    "T": IntParam("tokens: rows of x", min=1, max=1 << 20),
    "DM": IntParam("model width: x is T x DM, the frozen base W is DM x DM", min=1, max=1 << 20),
    "R": IntParam("LoRA rank: A is DM x R, B is R x DM (R <= DM)", min=1, max=1 << 20),
    "delta": IntParam("central-difference step, in Q20 units", min=1, max=1 << 40),
    "tol_permil": IntParam("a cell passes when |num - ana| * 1000 / max|grad| <= this", min=0, max=1000),
}


def check_model(p: dict) -> None:
    """The rank fits the width, and the run's tensors and the gradcheck's temporaries fit the memory."""
    if p["R"] > p["DM"]:
        raise ConfigError(f"R={p['R']} must not exceed DM={p['DM']} (a LoRA rank is at most the width)")
    T, DM, R = p["T"], p["DM"], p["R"]
    footprint.require_memory(T, DM, R, pooled.gradcheck_workers(p.get("workers", 0), T, DM, R))
