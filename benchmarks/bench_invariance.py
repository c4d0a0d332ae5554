"""The invariance gate's overhead on a user's function: ``X @ W`` (examples/invariance/matmul.py) at N=256,
D=784, H=256 on the process executor. The gate reports how often it called the target (``calls``) and the time
spent inside it (``target_seconds``); its overhead, gate seconds less target seconds, must be at most 20% of
target_seconds plus 0.2 s.

``target_seconds`` adds up the time inside every call, the pool workers' calls included, so on two workers it
can exceed the gate's wall time: the overhead is then negative, and the bound holds with room to spare.
"""

from __future__ import annotations

import numpy as np
from measure import ROOT, median

N, D, H = 256, 784, 256


def inputs() -> str:
    """The example's inputs, seeded, written once beside the bench's results."""
    path = ROOT / "bench-results" / f"invariance-matmul-{N}x{D}x{H}.npz"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        rng = np.random.default_rng(0)
        np.savez(path, X=rng.standard_normal((N, D)).astype(np.float32),
                 W=rng.standard_normal((D, H)).astype(np.float32))
    return str(path)


def measure(child) -> tuple[dict, list[tuple[str, bool, str]]]:
    target = str(ROOT / "examples" / "invariance" / "matmul.py") + ":forward"
    m = child({"gate": "invariance", "sets": ["static=W", "executor=process"], "repeat": 3,
               "options": {"target": target, "inputs": inputs()}})
    runs = m["runs"]
    seconds = median(r["seconds"] for r in runs)
    inside = median(r["metrics"]["target_seconds"] for r in runs)
    calls = runs[0]["metrics"]["calls"]
    overheads = [r["seconds"] - r["metrics"]["target_seconds"] for r in runs]
    bounds = [0.2 * r["metrics"]["target_seconds"] + 0.2 for r in runs]
    ok = all(o <= b for o, b in zip(overheads, bounds, strict=True))
    print(f"\ninvariance X @ W, N={N} D={D} H={H}, process executor: gate {seconds:.3f} s, {calls} calls, "
          f"{inside:.3f} s inside the target, overhead {median(overheads):+.3f} s (bound {median(bounds):.3f} s; "
          "medians of 3; the target's seconds add up every worker's calls)")
    results = {"seconds": seconds, "target_seconds": inside, "calls": calls, "overhead_seconds": median(overheads),
               "bound_seconds": median(bounds), "found_i1": not runs[0]["passed"]}
    return results, [("invariance X @ W at N=256: overhead <= 20% of target seconds + 0.2 s", ok,
                      f"{median(overheads):+.3f} s of {median(bounds):.3f} s")]
