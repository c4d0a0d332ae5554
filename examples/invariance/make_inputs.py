"""Write the examples' input archives: ``python examples/invariance/make_inputs.py [DIR]`` (default: the
current directory) writes ``mlp.npz`` (for mlp_rowloop.py and the adapters) and ``matmul.npz`` (for
matmul.py), seeded, so every run checks the same numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

#: the sizes of both archives: a batch of 64 MNIST-sized rows, 256 hidden units, 10 classes
B, D, H, O = 64, 784, 256, 10


def mlp_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """The MLP's batch and weights: X (B, D), W1 (H, D), b1 (H,), W2 (O, H), b2 (O,), all float32."""
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((B, D), np.float32),
            "W1": (rng.standard_normal((H, D), np.float32) / np.float32(np.sqrt(D))),
            "b1": rng.standard_normal(H, np.float32) * np.float32(0.1),
            "W2": (rng.standard_normal((O, H), np.float32) / np.float32(np.sqrt(H))),
            "b2": rng.standard_normal(O, np.float32) * np.float32(0.1)}


def matmul_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """The product's batch and matrix: X (B, D), W (D, H), float32."""
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((B, D), np.float32), "W": rng.standard_normal((D, H), np.float32)}


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "mlp.npz", **mlp_arrays())
    np.savez(out / "matmul.npz", **matmul_arrays())
    print(f"wrote {out / 'mlp.npz'} and {out / 'matmul.npz'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
