"""Real JSON reports for the HTML tests: each gate run through the CLI, with planted faults and with
``--compare-grads`` files that differ from the gate's own gradients by a few cells."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np
from click.testing import CliRunner


@contextlib.contextmanager
def inside(directory: Path):
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def run_json(directory: Path, *args: str) -> dict:
    """``nxgates run ARGS --json`` in ``directory`` (packaged registry): the report document."""
    from nxgates.cli import cli

    with inside(directory):
        result = CliRunner().invoke(cli, ["run", *args, "-q", "--json", "r.json"], catch_exceptions=False)
        assert result.exit_code in (0, 1), result.output
        return json.loads(Path("r.json").read_text())


def moved_float_grads(directory: Path) -> Path:
    """parallel-grad's saved gradients with cells 1 and 2 ULP away and one of the opposite sign."""
    run_json(directory, "parallel-grad", "--save-grads", "g.npy")
    grads = np.load(directory / "g.npy")
    up = np.float32(np.inf)
    for i in (5, 40):
        grads.flat[i] = np.nextafter(grads.flat[i], up)
    grads.flat[77] = np.nextafter(np.nextafter(grads.flat[77], up), up)
    grads.flat[100] = -grads.flat[100] if grads.flat[100] else np.float32(1)
    np.save(directory / "moved.npy", grads)
    return directory / "moved.npy"


def moved_lora_grads(directory: Path, gate: dict) -> Path:
    """lora's own dA, dB with one cell of each moved by a few Q20 units."""
    params, metrics = gate["params"], gate["metrics"]
    dA = np.array(metrics["A"]["analytic"], dtype=np.int64).reshape(params["DM"], params["R"])
    dB = np.array(metrics["B"]["analytic"], dtype=np.int64).reshape(params["R"], params["DM"])
    dA[1, 0] += 3
    dB[0, 4] -= 1
    np.savez(directory / "lora_moved.npz", dA=dA, dB=dB)
    return directory / "lora_moved.npz"


def merged(*docs: dict) -> dict:
    """One report of several runs' gates, as ``nxgates run A B`` would write it."""
    gates = [g for d in docs for g in d["gates"]]
    environment = dict(docs[0]["environment"])
    environment["gates"] = [e for d in docs for e in d["environment"].get("gates", [])]
    return {**docs[0], "passed": all(g["passed"] for g in gates), "gates": gates, "environment": environment}


def scenarios(directory: Path) -> dict[str, dict]:
    """Every gate's report the page has a plot for: green, with a planted fault, and with --compare-grads."""
    lora = run_json(directory, "lora")
    return {
        "lora": lora,
        "lora-transposed-b": run_json(directory, "lora", "--inject", "transposed-b"),
        "lora-compare": run_json(directory, "lora", "--compare-grads", str(moved_lora_grads(directory,
                                                                                             lora["gates"][0]))),
        "ta-gradcheck": run_json(directory, "ta-gradcheck"),
        "ta-relu-grad": run_json(directory, "ta-gradcheck", "--inject", "relu-grad"),
        "parallel-grad": run_json(directory, "parallel-grad"),
        "parallel-grad-compare": run_json(directory, "parallel-grad", "--compare-grads",
                                          str(moved_float_grads(directory))),
        "dp-train": run_json(directory, "dp-train"),
        "lora-train": run_json(directory, "lora-train"),
    }
