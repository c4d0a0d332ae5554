"""How the benchmarks measure: a gate run in a child process (so its peak RSS is its own) through nxgates'
runner API, and whole-process wall times. Shared by bench.py and bench_dask.py; ``python measure.py --one
SPEC`` is the child."""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
GiB = 1 << 30


def one(spec: dict) -> dict:
    """In the child: run a gate ``spec['repeat']`` times, planned as ``nxgates run`` plans it; report seconds,
    metrics and peak RSS."""
    from nxgates.plan import RunRequest, plan_run

    request = RunRequest((spec["gate"],), tuple(spec.get("sets", [])), spec.get("preset"), timeout=None,
                         **spec.get("options", {}))  # run options (target, inputs): planned as `run` plans them
    plan = plan_run(request)
    runs = []
    for _ in range(spec.get("repeat", 1)):
        t0 = time.perf_counter()
        report = plan.run(plan.gates[0])
        runs.append({"seconds": time.perf_counter() - t0, "passed": report.passed,
                     "metrics": {k: v for k, v in report.output.metrics.items() if not isinstance(v, dict)}})
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"runs": runs, "rss_self": self_kib * 1024, "rss_children": children_kib * 1024}


def child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout)


def median(values):
    return statistics.median(values)


def wall(cmd: list[str], repeats: int) -> float:
    return wall_ok(cmd, repeats)[0]


def wall_ok(cmd: list[str], repeats: int) -> tuple[float, bool]:
    """Median whole-process seconds of ``cmd``, and whether every run exited 0."""
    times, ok = [], True
    for _ in range(repeats):
        t0 = time.perf_counter()
        ok &= subprocess.run(cmd, capture_output=True, check=False, cwd="/tmp").returncode == 0
        times.append(time.perf_counter() - t0)
    return median(times), ok


def paired_wall(a: list[str], b: list[str], pairs: int) -> tuple[float, float, float, str]:
    """Whole-process seconds of ``a`` and ``b`` run in turn (A B A B ...) and the median of the pairwise
    ratios A/B: pairing keeps a ratio honest while the machine's speed drifts."""
    for cmd in (a, b):  # warm-up, not counted
        subprocess.run(cmd, capture_output=True, check=False, cwd="/tmp")
    times_a, times_b = [], []
    for _ in range(pairs):
        for cmd, times in ((a, times_a), (b, times_b)):
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=False, cwd="/tmp")
            times.append(time.perf_counter() - t0)
    ratio = median(x / y for x, y in zip(times_a, times_b, strict=True))
    return median(times_a), median(times_b), ratio, "paired here"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(one(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: measure.py --one SPEC (the child of bench.py)")
