"""Given tensors and both reduction orders give the same bits on every executor (thread, process, dask)."""

import numpy as np
import pytest

from nxgates.core.pool import dask_available
from nxgates.gates import dp_train
from nxgates.gates import parallel_grad as pg
from nxgates.tensors.mlp_spec import MLP_INPUTS
from tests.helpers import ctx

SIZES = {"D": 7, "H": 5, "O": 3, "B": 6}


def user_arrays():
    """Tensors that are not the seed's formulas: another implementation's weights and batch."""
    rng = np.random.default_rng(7)
    arrays = MLP_INPUTS.make(SIZES)
    return {k: (rng.standard_normal(v.shape) * 0.5).astype(np.float32) for k, v in arrays.items()}


def passed(out):
    assert all(c.passed for c in out.checks), [(c.name, c.detail) for c in out.checks]
    return out.digest


@pytest.mark.parametrize("order", ["tree", "sequential"])
def test_parallel_grad_on_given_tensors_is_the_same_on_every_executor(order, dask_scheduler):
    arrays = user_arrays()
    params = {**SIZES, "workers": 2, "reduction": order}
    digests = {e: passed(pg.run(ctx({**params, "executor": e}, inputs=arrays))) for e in ("thread", "process")}
    if dask_available():  # on the session's cluster, by its address
        digests["dask"] = passed(pg.run(ctx({**params, "executor": "dask"}, inputs=arrays,
                                            scheduler=dask_scheduler(2))))
    assert len(set(digests.values())) == 1, digests
    assert digests["thread"] != passed(pg.run(ctx({**params, "executor": "thread"})))  # not the formulas'


@pytest.mark.parametrize("order", ["tree", "sequential"])
def test_dp_train_on_given_tensors_is_the_same_on_every_executor(order):
    arrays = user_arrays()
    params = {**SIZES, "steps": 2, "lr_num": 1, "lr_den": 50, "workers": 2, "step_exp": 3, "tol_permil": 30,
              "d4_examples": 0, "reduction": order}
    digests = {passed(dp_train.run(ctx({**params, "executor": e}, inputs=arrays))) for e in ("thread", "process")}
    assert len(digests) == 1
