"""The tape's rows of `make bench`: parallel-grad at large against the row-writing floor and the batched
peers (JAX, torch), and the tape's other users next to the unrecorded tape's figures. ``python
benchmarks/bench_tape.py`` measures these rows alone (parallel-grad at large included)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from floors import row_writing_seconds
from measure import PEER_PYTHON, ROOT, median, wall_ok

#: the same figures of the tape that rebuilt its graph for every example, on this 2-core machine: what the
#: recorded pass is read against (no target: the machine is shared, so these are for the record)
UNRECORDED = {"dp-train large serial step": 0.17, "dp-train large parallel step": 0.10,
              "ta-gradcheck large whole process": 0.17}
#: the serial pass at most this many times the row-writing floor
FLOOR_RATIO = 3.0
PEERS = (("jax", "jit(vmap(grad))"), ("torch", "torch.func.vmap(grad)"))


def run_peer(name: str) -> dict | None:
    """benchmarks/peer_NAME.py at large in .venv-peer: its JSON line, or None without the peer."""
    if not PEER_PYTHON.exists():
        return None
    out = subprocess.run([str(PEER_PYTHON), str(ROOT / f"benchmarks/peer_{name}.py"), "784", "256", "10", "256",
                          "5"], capture_output=True, text=True, check=False)
    if out.returncode != 0 and "ModuleNotFoundError" in out.stderr:
        return None
    if out.returncode != 0:
        raise RuntimeError(f"peer_{name}.py failed:\n{out.stderr}")
    return json.loads(out.stdout)


def measure(child: Callable[[dict], dict], serial: float, parallel: float) -> tuple[dict, list]:
    """The rows, given parallel-grad's serial pass and parallel pass (process, 2 workers) at large."""
    results: dict = {}
    targets: list[tuple[str, bool, str]] = []
    print("\nthe tape")
    floor = row_writing_seconds(784, 256, 10, 256)
    results["floor"] = {"row_writing_seconds": floor, "serial_seconds": serial, "ratio": serial / floor}
    print(f"  parallel-grad large: row-writing floor (outer products into (40, NP) rows) {floor:.4f} s; serial "
          f"pass {serial:.4f} s = {serial / floor:.2f}x the floor")
    targets.append((f"parallel-grad large: serial pass <= {FLOOR_RATIO:g}x the row-writing floor",
                    serial <= FLOOR_RATIO * floor, f"{serial / floor:.2f}x"))
    results["peers"] = {"ours_parallel_seconds": parallel}
    for name, what in PEERS:
        peer = results["peers"][name] = run_peer(name)
        if peer is None:
            print(f"  parallel-grad large vs {name} {what}: no peer (`make peer-venv` installs it into .venv-peer)")
            continue
        print(f"  parallel-grad large: parallel pass on 2 workers {parallel:.4f} s ({256 / parallel:.0f} ex/s); "
              f"{name} {peer[name]} {what} {peer['seconds']:.4f} s ({256 / peer['seconds']:.0f} ex/s) = "
              f"{peer['seconds'] / parallel:.2f}x {name}'s speed")
        targets.append((f"parallel-grad large: parallel pass faster than {name} {what}", parallel < peer["seconds"],
                        f"{peer['seconds'] / parallel:.2f}x {name}'s speed"))

    for executor in ("thread", "process"):
        m = child({"gate": "dp-train", "preset": "large", "sets": [f"executor={executor}"], "repeat": 3})
        runs = [r["metrics"] for r in m["runs"]]
        ser = median(r["serial_seconds"] / r["steps"] for r in runs)
        par = median(r["parallel_seconds"] / r["steps"] for r in runs)
        results[f"dp_train_large_{executor}"] = {"serial_step_seconds": ser, "parallel_step_seconds": par}
        print(f"  dp-train large ({executor}): {ser:.3f} s a step serial (unrecorded tape "
              f"{UNRECORDED['dp-train large serial step']:.2f}), {par:.3f} s a step parallel (unrecorded tape "
              f"{UNRECORDED['dp-train large parallel step']:.2f}); medians of 3")
    nxgates = str(ROOT / ".venv/bin/nxgates")
    seconds, ok = wall_ok([nxgates, "run", "ta-gradcheck", "--preset", "large", "-q"], 5)
    results["ta_gradcheck_large_whole_process_seconds"] = seconds
    print(f"  ta-gradcheck large, whole process: {seconds:.2f} s, green={ok} (unrecorded tape "
          f"{UNRECORDED['ta-gradcheck large whole process']:.2f} s; median of 5)")
    return results, targets


def main() -> int:
    from measure import child

    m = {ex: child({"gate": "parallel-grad", "preset": "large", "sets": [f"executor={ex}"], "repeat": 5})
         for ex in ("thread", "process")}
    serial = median(r["metrics"]["serial_seconds"] for r in m["thread"]["runs"])
    parallel = median(r["metrics"]["parallel_seconds"] for r in m["process"]["runs"])
    print(f"parallel-grad large: serial pass {serial:.4f} s (thread), parallel pass {parallel:.4f} s (process, "
          "2 workers); medians of 5")
    _, targets = measure(child, serial, parallel)
    for name, ok, figure in targets:
        print(f"  {'MET   ' if ok else 'MISSED'} {name}: {figure}")
    return 0 if all(ok for _, ok, _ in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
