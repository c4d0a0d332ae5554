"""``--compare-grads`` against another implementation: where the rows part, per tensor and in ULPs, and
``--ulp N`` to pass within N ULPs."""

import json

import numpy as np
import pytest

from nxgates.core.ulp import FIRST_CELLS, Tensor, UlpReport, ulp_distance
from nxgates.errors import ConfigError
from nxgates.gates import parallel_grad as pg
from tests.helpers import assert_usage_error, ctx, run_in_process

F32 = np.float32
LAYOUT = (Tensor("W1", 0, 2, 3), Tensor("W2", 6, 1, 2))  # H=2 D=3 O=1: NP = 8


def nextafter(x, steps):
    for _ in range(abs(steps)):
        x = np.nextafter(x, F32(np.inf) if steps > 0 else F32(-np.inf), dtype=F32)
    return x


def test_ulp_distance_counts_the_floats_between():
    one = F32(1)
    assert ulp_distance(np.array([one]), np.array([nextafter(one, 5)]))[0] == 5
    assert ulp_distance(np.array([F32(-0.0)]), np.array([F32(0.0)]))[0] == 0
    tiny = np.array([np.nextafter(F32(0), F32(1))])  # the smallest subnormals, either side of zero
    assert ulp_distance(tiny, -tiny)[0] == 2


def test_the_report_buckets_signs_and_non_finite_cells():
    ours = np.ones((3, 8), F32)
    theirs = ours.copy()
    theirs[0, 0] = nextafter(F32(1), 1)  # 1 ULP
    theirs[0, 1] = nextafter(F32(1), -3)  # 3 ULP
    theirs[1, 4] = nextafter(F32(1), 4)  # 4 ULP, W1 row 1 col 1
    theirs[1, 7] = nextafter(F32(1), 40)  # 16+, W2
    theirs[2, 2] = F32(-1)  # a sign difference
    theirs[2, 6] = F32(np.nan)  # non-finite
    r = UlpReport(LAYOUT)
    r.add(10, ours, theirs)
    assert r.differing == {"W1": 4, "W2": 2} and r.cells == {"W1": 18, "W2": 6}
    assert r.histogram == {"0": 18, "1": 1, "2-3": 1, "4-15": 1, "16+": 1}
    assert (r.sign, r.nonfinite) == (1, 1)
    assert r.max_ulps == ulp_distance(np.array([F32(1)]), np.array([F32(-1)]))[0]
    first = [(c.example, c.tensor, c.row, c.col, c.ulps) for c in r.first]
    assert first[:4] == [(10, "W1", 0, 0, 1), (10, "W1", 0, 1, 3), (11, "W1", 1, 1, 4), (11, "W2", 0, 1, 40)]
    assert first[5] == (12, "W2", 0, 0, None)
    m = json.loads(json.dumps(r.metrics()))  # every field is plain JSON (NaN as a string)
    assert m["tensors"]["W1"] == {"cells": 18, "differing": 4, "share": 4 / 18}
    assert m["first_differing"][5]["theirs"] == "nan"
    assert not r.passes(0) and not r.passes(1 << 40)  # NaN never passes


def test_ulp_tolerance():
    ours = np.ones((1, 8), F32)
    theirs = ours.copy()
    theirs[0, 3] = nextafter(F32(1), 2)
    r = UlpReport(LAYOUT)
    r.add(0, ours, theirs)
    assert (r.passes(0), r.passes(1), r.passes(2)) == (False, False, True)


def test_the_first_cells_are_the_first_in_example_order_across_chunks():
    r = UlpReport(LAYOUT)
    ours = np.zeros((40, 8), F32)
    for first in (20, 0):  # chunks may be folded in any order: the list keeps the first ones
        r.add(first, ours[:20], ours[:20] + F32(1))
    assert len(r.first) == FIRST_CELLS
    assert [c.example for c in r.first] == [0] * 8 + [1] * 2


SMALL = {"D": 5, "H": 3, "O": 2, "B": 9, "workers": 2, "executor": "thread"}


def saved(tmp_path, order, **over):
    path = tmp_path / f"{order}.npy"
    pg.run(ctx({**SMALL, **over, "reduction": order}, save_grads=str(path)))
    return path


def test_a_sequential_implementation_differs_and_the_report_says_where(tmp_path):
    theirs = saved(tmp_path, "sequential")
    out = pg.run(ctx(SMALL, compare_grads=str(theirs)))
    t4 = next(c for c in out.checks if c.name == pg.T4)
    m = out.metrics["compare_grads"]
    assert not t4.passed and t4.detail.startswith(f"{m['differing_cells']} cells differ from {theirs}, largest ")
    assert m["differing_cells"] > 0 and m["ulp"] == 0
    assert m["tensors"]["W1"]["cells"] == 9 * 15 and m["tensors"]["W2"]["cells"] == 9 * 6
    assert sum(m["histogram"].values()) + m["sign_differences"] + m["nonfinite"] == 9 * 21
    lines = [i.text for i in out.items if getattr(i, "level", "") == "detail"]
    assert lines[0].startswith("   W1: ") and lines[2].startswith("   ULP distances: 0:")
    passing = pg.run(ctx(SMALL, compare_grads=str(theirs), ulp=m["max_ulps"]))
    assert next(c for c in passing.checks if c.name == pg.T4).passed
    failing = pg.run(ctx(SMALL, compare_grads=str(theirs), ulp=m["max_ulps"] - 1))
    assert not next(c for c in failing.checks if c.name == pg.T4).passed


def test_identical_files_keep_the_plain_t4_match_line(tmp_path):
    ours = saved(tmp_path, "tree")
    out = pg.run(ctx(SMALL, compare_grads=str(ours)))
    t4 = next(c for c in out.checks if c.name == pg.T4)
    assert t4.passed and t4.detail.startswith(f"matches {ours} (sha256 ")
    assert out.metrics["compare_grads"]["differing_cells"] == 0


def test_a_raw_float32_dump(tmp_path):
    rows = np.load(saved(tmp_path, "sequential"))
    raw = tmp_path / "theirs.bin"
    raw.write_bytes(rows.astype("<f4").tobytes())
    out = pg.run(ctx({**SMALL, "reduction": "sequential"}, compare_grads=str(raw)))
    assert all(c.passed for c in out.checks)
    raw.write_bytes(rows.astype("<f4").tobytes()[:-4])
    with pytest.raises(ConfigError, match=r"theirs.bin: 752 bytes, expected 756 \(raw float32 of shape"):
        pg.run(ctx(SMALL, compare_grads=str(raw)))


def test_ulp_without_a_file_is_a_usage_error(tmp_path):
    r = run_in_process("run", "parallel-grad", "--ulp", "3", cwd=tmp_path)
    assert_usage_error(r, "--ulp sets how close --compare-grads must be")
    r = run_in_process("run", "lora", "--ulp", "3", cwd=tmp_path)
    assert_usage_error(r, "--ulp applies to none of: lora")


FLAT_IN_MEMORY = """
import json, sys, tracemalloc
import numpy as np
from nxgates.core.gradfiles import GradReader
from nxgates.core.ulp import FIRST_CELLS, Tensor

folder = sys.argv[1]
layout = (Tensor("W1", 0, 3, 5), Tensor("W2", 15, 2, 3))
ours = np.ones((64, 21), np.float32)
peaks = {}
for B in (1024, 4096):
    path = f"{folder}/theirs{B}.npy"
    three_ulps_up = (np.array(1, np.float32).view(np.int32) + 3).view(np.float32)
    np.save(path, np.full((B, 21), three_ulps_up))
    tracemalloc.start()
    reader = GradReader.open(path, B, 21, layout)
    buf = np.empty((64, 21), np.float32)
    for first in range(0, B, 64):
        reader.read(first, buf)
        reader.report.add(first, ours, buf)
    reader.close()
    peaks[B] = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert reader.report.histogram["2-3"] == B * 21 and len(reader.report.first) == FIRST_CELLS
print(json.dumps(peaks))
"""


def test_the_comparison_stays_flat_in_memory_at_a_large_batch(tmp_path):
    """B=4096 against B=1024: the file is read a chunk at a time (as the gate's stream does) and the report
    holds counts and ten cells, so the peak of traced allocations does not grow with B. Measured in a process
    of its own: tracemalloc counts every thread's allocations, and a test run's process may hold others."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FLAT_IN_MEMORY, str(tmp_path)], capture_output=True, text=True,
                         check=True, timeout=120)
    peaks = {int(b): peak for b, peak in json.loads(out.stdout).items()}
    assert peaks[4096] < peaks[1024] + (16 << 10), peaks  # the whole (4096, 21) file would be 344 KiB
