"""The parallel-grad MLP's seed data (the gate's ``ta_constf`` formulas) for the peers, which run in
.venv-peer without nxgates: weights as (H, D) and (O, H), inputs (B, D), targets (B, O), float32."""

from __future__ import annotations

import numpy as np


def constf(n: np.ndarray, d: int) -> np.ndarray:
    return n.astype(np.float32) / np.float32(d)


def seed_data(D: int, H: int, O: int, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    i = np.arange(H * D + O * H)
    w = constf(((i * 7 + 1) % 13) - 6, 8)
    x = constf(((np.arange(B * D) * 5 + 2) % 11) - 5, 7).reshape(B, D)
    t = constf(((np.arange(B * O) * 3 + 1) % 9) - 4, 6).reshape(B, O)
    return w[: H * D].reshape(H, D).copy(), w[H * D :].reshape(O, H).copy(), x, t
