"""The dask executor in `make bench`: LocalCluster start-up, and the parallel pass at ``large`` next to the
process executor's in the same run (target: within 1.5x). Runnable alone: ``python benchmarks/bench_dask.py``.

The two passes do not move the same bytes: forked processes write their rows straight into shared memory,
Dask workers send every row back over TCP (B x NP float32 = 200 MB per pass at ``large``), as a cluster of
separate machines must.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

TARGET_RATIO = 1.5


def measure(child: Callable[[dict], dict], repeat: int = 5) -> tuple[dict, list[tuple[str, bool, str]]]:
    """Run parallel-grad at ``large`` with ``process``, ``dask`` (every run starting its own LocalCluster, as
    a plain ``executor=dask`` does) and ``dask-warm`` (every run on one cluster, as with ``--scheduler``),
    ``repeat`` runs each; print a table; return the figures and the targets."""
    from nxgates.core.pool import dask_available

    if not dask_available():
        print("\n(dask not measured: pip install 'nxgates[dask]')")
        return {}, []
    print(f"\n{'dask':<8}{'preset':<8}{'executor':<9}{'parallel s':>11}{'serial s':>10}{'cluster start s':>16}"
          f"{'pool start s':>13}")
    results: dict = {}
    for executor in ("process", "dask", "dask-warm"):
        spec = {"gate": "parallel-grad", "preset": "large", "repeat": repeat,
                "sets": [f"executor={executor.split('-')[0]}", "workers=2"]}
        # dask-warm: every run on one cluster that outlives them, as with --scheduler
        m = _on_one_cluster(child, spec) if executor == "dask-warm" else child(spec)
        runs = [r["metrics"] for r in m["runs"]]
        row = {
            "parallel_seconds": statistics.median(r["parallel_seconds"] for r in runs),
            "parallel_seconds_all": [r["parallel_seconds"] for r in runs],
            "serial_seconds": statistics.median(r["serial_seconds"] for r in runs),
            "cluster_start_seconds": statistics.median(r.get("cluster_start_seconds", 0.0) for r in runs),
            "pool_start_seconds": statistics.median(r["pool_start_seconds"] for r in runs),
            "passed": all(r["passed"] for r in m["runs"]),
            "grads_sha256": runs[0]["grads_sha256"],
        }
        results[executor] = row
        print(f"{'':<8}{'large':<8}{executor:<9}{row['parallel_seconds']:>11.4f}{row['serial_seconds']:>10.4f}"
              f"{row['cluster_start_seconds']:>16.3f}{row['pool_start_seconds']:>13.3f}")
    # the batch streams on Dask too: the gate's own memory at a 16x batch (the cluster's workers are other processes)
    peaks = {}
    for B in (256, 4096):
        sets = ["executor=dask", "workers=2", f"B={B}"]
        m = child({"gate": "parallel-grad", "preset": "large", "repeat": 1, "sets": sets})
        peaks[B] = (m["rss_self"], m["runs"][0]["seconds"], m["runs"][0]["passed"])
    results["streamed_gate_rss"] = {str(B): {"peak_rss": p, "seconds": t, "passed": ok}
                                    for B, (p, t, ok) in peaks.items()}
    print(f"  dask large, the gate's peak RSS: B=256 {peaks[256][0] / 2**20:.0f} MiB, B=4096 "
          f"{peaks[4096][0] / 2**20:.0f} MiB ({peaks[4096][1]:.1f} s, green={peaks[4096][2]}); no target")
    ratio = results["dask"]["parallel_seconds"] / results["process"]["parallel_seconds"]
    warm = results["dask-warm"]["parallel_seconds"] / results["process"]["parallel_seconds"]
    results["dask_over_process"], results["dask_warm_over_process"] = ratio, warm
    targets = [
        (f"dask large: parallel pass within {TARGET_RATIO}x of the process executor's", ratio <= TARGET_RATIO,
         f"{ratio:.2f}x ({results['dask']['parallel_seconds']:.3f} s vs {results['process']['parallel_seconds']:.3f} s;"
         f" on a warm cluster {warm:.2f}x; cluster start {results['dask']['cluster_start_seconds']:.2f} s)"),
        ("dask large: same bits as the process executor, every run green",
         results["dask"]["grads_sha256"] == results["process"]["grads_sha256"] and results["dask"]["passed"],
         "sha256 equal" if results["dask"]["grads_sha256"] == results["process"]["grads_sha256"] else "DIFFERENT"),
    ]
    return results, targets


def _on_one_cluster(child: Callable[[dict], dict], spec: dict) -> dict:
    """``child(spec)`` with NXGATES_DASK_SCHEDULER naming a LocalCluster started here for all its runs."""
    import os

    from nxgates.core.pool.dask import SCHEDULER_ENV, local_cluster

    with local_cluster(2) as cluster:
        os.environ[SCHEDULER_ENV] = cluster.scheduler_address
        try:
            return child(spec)
        finally:
            del os.environ[SCHEDULER_ENV]


if __name__ == "__main__":
    from measure import child  # benchmarks/ is this script's directory

    _, targets = measure(child)
    for name, ok, figure in targets:
        print(f"  {'MET   ' if ok else 'MISSED'} {name}: {figure}")
    sys.exit(0 if all(ok for _, ok, _ in targets) else 1)
