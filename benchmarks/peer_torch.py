"""Per-example gradients of the parallel-grad MLP with torch.func.vmap(grad): the batched peer.

Run by benchmarks/bench.py with the interpreter of .venv-peer (made by `make peer-venv`); torch is never
a dependency of nxgates. Prints one JSON line: {"seconds": median, "torch": version, "threads": n}.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from peer_data import seed_data
from torch.func import grad, vmap


def main() -> None:
    D, H, O, B, repeats = (int(a) for a in sys.argv[1:6])
    first, second, x, t = seed_data(D, H, O, B)
    W1, W2 = torch.from_numpy(first), torch.from_numpy(second)
    X, T = torch.from_numpy(x), torch.from_numpy(t)

    def loss(params, xb, tb):
        w1, w2 = params
        return torch.mean((w2 @ torch.relu(w1 @ xb) - tb) ** 2)

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))

    def once() -> float:
        t0 = time.perf_counter()
        g1, g2 = per_example((W1, W2), X, T)
        flat = torch.cat([g1.reshape(B, -1), g2.reshape(B, -1)], dim=1)  # the gate's (B, NP) layout
        assert flat.shape == (B, H * D + O * H)
        return time.perf_counter() - t0

    once()  # warm-up
    seconds = statistics.median(once() for _ in range(repeats))
    print(json.dumps({"seconds": seconds, "torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
