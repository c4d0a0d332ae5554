"""The tape's rows of `make bench`: parallel-grad at large against the row-writing floor, its own arithmetic
written as a plain loop, and the batched peers (JAX, torch); the tape's other users next to the unrecorded
tape's figures. ``python benchmarks/bench_tape.py`` measures these rows alone (parallel-grad at large
included)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from floors import plain_loop_seconds, replay_buffer, row_writing_seconds
from measure import PEER_PYTHON, ROOT, median, wall_ok

#: the same figures of the tape that rebuilt its graph for every example, on this 2-core machine: what the
#: recorded pass is read against (no target: the machine is shared, so these are for the record)
UNRECORDED = {"dp-train large serial step": 0.17, "dp-train large parallel step": 0.10,
              "ta-gradcheck large whole process": 0.17}
#: the serial pass at most this many times the row-writing floor
FLOOR_RATIO = 3.0
#: reduction=sequential's serial pass at most this many times the tree's
SEQUENTIAL_RATIO = 2.0
LARGE = (784, 256, 10, 256)
PEERS = (("jax", "jit(vmap(grad))"), ("torch", "torch.func.vmap(grad)"))


def run_peer(name: str, repeats: int = 3) -> dict | None:
    """benchmarks/peer_NAME.py at large in .venv-peer: its JSON line, or None without the peer."""
    if not PEER_PYTHON.exists():
        return None
    out = subprocess.run([str(PEER_PYTHON), str(ROOT / f"benchmarks/peer_{name}.py"), *map(str, LARGE), str(repeats)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0 and "ModuleNotFoundError" in out.stderr:
        return None
    if out.returncode != 0:
        raise RuntimeError(f"peer_{name}.py failed:\n{out.stderr}")
    return json.loads(out.stdout)


def measure(child: Callable[[dict], dict], rounds: int = 5) -> tuple[dict, list]:
    """The rows. The machine's speed drifts (it is shared), so each ratio is paired: every round runs
    parallel-grad at large once (process executor, 2 workers: its serial and parallel pass), then the floors,
    the plain loop and each peer right after it; a ratio is the median of the rounds' ratios.

    The floor is judged with the ufunc buffer the tape's replay runs with (numpy's least time for the rows);
    the same floor at numpy's default buffer is shown beside it."""
    results: dict = {"rounds": []}
    targets: list[tuple[str, bool, str]] = []
    buffer = replay_buffer(*LARGE[:3])
    print(f"\nthe tape (parallel-grad at large, paired with the floors, the plain loop and the peers: medians of "
          f"{rounds} rounds; ufunc buffer {buffer})")
    for _ in range(rounds):
        run = child({"gate": "parallel-grad", "preset": "large", "sets": ["executor=process"], "repeat": 1})
        m = run["runs"][0]["metrics"]
        seq = child({"gate": "parallel-grad", "preset": "large", "sets": ["executor=process", "reduction=sequential"],
                     "repeat": 1})["runs"][0]["metrics"]
        results["rounds"].append({"serial_seconds": m["serial_seconds"], "parallel_seconds": m["parallel_seconds"],
                                  "sequential_serial_seconds": seq["serial_seconds"],
                                  "floor_seconds": row_writing_seconds(*LARGE, repeats=3, buffer=buffer),
                                  "default_buffer_floor_seconds": row_writing_seconds(*LARGE, repeats=3),
                                  "plain_loop_seconds": plain_loop_seconds(*LARGE, buffer=buffer),
                                  **{name: run_peer(name) for name, _ in PEERS}})
    rounds_ = results["rounds"]

    def ratio(a: str, b: str) -> float:
        return median(r[a] / r[b] for r in rounds_)

    serial, floor = median(r["serial_seconds"] for r in rounds_), median(r["floor_seconds"] for r in rounds_)
    plain = median(r["plain_loop_seconds"] for r in rounds_)
    default_floor = median(r["default_buffer_floor_seconds"] for r in rounds_)
    results["floor"] = {"row_writing_seconds": floor, "serial_seconds": serial,
                        "ratio": ratio("serial_seconds", "floor_seconds"), "ufunc_buffer": buffer,
                        "default_buffer_row_writing_seconds": default_floor,
                        "default_buffer_ratio": ratio("serial_seconds", "default_buffer_floor_seconds"),
                        "plain_loop_seconds": plain, "plain_loop_ratio": ratio("plain_loop_seconds", "floor_seconds"),
                        "serial_over_plain_loop": ratio("serial_seconds", "plain_loop_seconds")}
    f = results["floor"]
    each = ", ".join(f"{r['serial_seconds'] / r['floor_seconds']:.2f}" for r in rounds_)
    print(f"  serial pass {serial:.4f} s; row-writing floor (outer products into (40, NP) rows) {floor:.4f} s; "
          f"serial / floor = {f['ratio']:.2f}x ({each})")
    print(f"  the same arithmetic as a plain numpy loop (no tape, same bits) {plain:.4f} s = "
          f"{f['plain_loop_ratio']:.2f}x the floor; serial pass / plain loop = {f['serial_over_plain_loop']:.2f}x")
    print(f"  the floor at numpy's default ufunc buffer {default_floor:.4f} s: serial / that floor = "
          f"{f['default_buffer_ratio']:.2f}x")
    targets.append((f"parallel-grad large: serial pass <= {FLOOR_RATIO:g}x the row-writing floor",
                    f["ratio"] <= FLOOR_RATIO, f"{f['ratio']:.2f}x (the plain loop: {f['plain_loop_ratio']:.2f}x)"))
    seq_ratio = ratio("sequential_serial_seconds", "serial_seconds")
    results["sequential"] = {"serial_seconds": median(r["sequential_serial_seconds"] for r in rounds_),
                             "ratio_to_tree": seq_ratio}
    print(f"  reduction=sequential: serial pass {results['sequential']['serial_seconds']:.4f} s, "
          f"{seq_ratio:.2f}x the tree's")
    targets.append((f"parallel-grad large: reduction=sequential's serial pass <= {SEQUENTIAL_RATIO:g}x the tree's",
                    seq_ratio <= SEQUENTIAL_RATIO, f"{seq_ratio:.2f}x"))
    parallel = median(r["parallel_seconds"] for r in rounds_)
    results["parallel_seconds"] = parallel
    for name, what in PEERS:
        if any(r[name] is None for r in rounds_):
            results[name] = None
            print(f"  parallel pass vs {name} {what}: no peer (`make peer-venv` installs it into .venv-peer)")
            continue
        peer = median(r[name]["seconds"] for r in rounds_)
        speed = median(r[name]["seconds"] / r["parallel_seconds"] for r in rounds_)
        results[name] = {"version": rounds_[0][name][name], "seconds": peer, "speed": speed,
                         "speeds": [r[name]["seconds"] / r["parallel_seconds"] for r in rounds_]}
        each = ", ".join(f"{r[name]['seconds'] / r['parallel_seconds']:.2f}" for r in rounds_)
        print(f"  parallel pass on 2 workers {parallel:.4f} s ({256 / parallel:.0f} ex/s); {name} "
              f"{rounds_[0][name][name]} {what} {peer:.4f} s ({256 / peer:.0f} ex/s): {speed:.2f}x {name}'s speed "
              f"({each})")
        targets.append((f"parallel-grad large: parallel pass faster than {name} {what}", speed > 1,
                        f"{speed:.2f}x {name}'s speed"))

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

    _, targets = measure(child)
    for name, ok, figure in targets:
        print(f"  {'MET   ' if ok else 'MISSED'} {name}: {figure}")
    return 0 if all(ok for _, ok, _ in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
