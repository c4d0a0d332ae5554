"""The LoRA model's parameters, declared once for every gate that builds it, and their cross-checks."""

from __future__ import annotations

import nxgates.core.lora.footprint as footprint
import nxgates.core.lora.pooled as pooled
from nxgates.errors import ConfigError
from nxgates.gatekit import IntParam

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
