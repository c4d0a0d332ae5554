"""The parallel-grad gate's fingerprint: the gradients' digest and the counts, the same on every executor and
worker count (a baseline is keyed without them), never a timing or a pool figure."""

import pytest

from nxgates.gates import parallel_grad as pg
from tests.helpers import ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 0, "executor": "thread"}
NAMES = ["grads_sha256", "nonzero_cells", "total_cells", "bit_mismatches", "rerun_bit_mismatches"]


def test_the_figures_are_the_reports_numbers():
    out = pg.run(ctx(SEED))
    assert list(out.fingerprints) == NAMES
    assert out.fingerprints == {name: out.metrics[name] for name in NAMES}
    assert out.fingerprints["grads_sha256"] == out.digest and out.fingerprints["total_cells"] == 8 * 192


@pytest.mark.parametrize("executor, workers", [("thread", 3), ("process", 2)])
def test_every_executor_and_worker_count_pins_the_same_figures(executor, workers):
    again = pg.run(ctx({**SEED, "executor": executor, "workers": workers}))
    assert again.fingerprints == pg.run(ctx(SEED)).fingerprints
