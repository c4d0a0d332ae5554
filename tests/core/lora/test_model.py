"""The LoRA model the lora gates share (nxgates/core/lora/model.py): the seed's initial tensors in C's integer
arithmetic, and its initialisation, forward and backward, tensor for tensor against a scalar transcription of the
seed, at its sizes and others (rows, widths and ranks all distinct)."""

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from tests.oracles.seed_lora import SeedModel


def test_init_uses_c_division():
    m = core_lora.init_model(3, 6, 2)
    # x[0] = ((2 % 11) - 5) * S / 10 = -3S/10 -> -314572 in C (floor would give -314573)
    assert int(m.x[0, 0]) == -314572
    assert m.W.dtype == np.int64


SIZES = [(3, 6, 2), (4, 5, 3), (2, 7, 7), (1, 1, 1)]


def _flat(a):
    return a.reshape(-1).tolist()


@pytest.mark.parametrize("T,DM,R", SIZES)
def test_init_is_the_seeds(T, DM, R):
    m, seed = core_lora.init_model(T, DM, R), SeedModel(T, DM, R)
    assert (m.x.shape, m.W.shape, m.A.shape, m.B.shape) == ((T, DM), (DM, DM), (DM, R), (R, DM))
    assert (_flat(m.x), _flat(m.W), _flat(m.A), _flat(m.B)) == (seed.x, seed.W, seed.A, seed.B)
    assert {a.dtype for a in (m.x, m.W, m.A, m.B)} == {np.dtype(np.int64)}


@pytest.mark.parametrize("T,DM,R", SIZES)
def test_forward_is_the_seeds_with_its_unrounded_sums(T, DM, R):
    m, seed = core_lora.init_model(T, DM, R), SeedModel(T, DM, R)
    f = core_lora.forward(m)
    assert f.loss == seed.fwd()
    assert type(f.loss) is int
    assert _flat(f.h) == seed.h and _flat(f.y) == seed.y
    assert _flat(f.acc_h) == _flat(m.x.astype(object) @ m.A.astype(object))
    assert _flat(f.acc_y) == _flat(f.h.astype(object) @ m.B.astype(object))
    assert f.xw.shape == (T, DM) and f.acc_h.shape == (T, R) and f.acc_y.shape == (T, DM)


@pytest.mark.parametrize("T,DM,R", SIZES)
def test_forward_reuses_a_given_xw(T, DM, R):
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    again = core_lora.forward(m, f.xw)
    assert again.xw is f.xw and again.loss == f.loss
    moved = core_lora.forward(m, f.xw + 1)
    assert _flat(moved.y) == _flat(f.y + 1)


@pytest.mark.parametrize("T,DM,R", SIZES)
def test_backward_is_the_seeds(T, DM, R):
    m, seed = core_lora.init_model(T, DM, R), SeedModel(T, DM, R)
    seed.fwd()
    dA, dB = core_lora.backward(m, core_lora.forward(m))
    want_a, want_b = seed.bwd()
    assert (_flat(dA), _flat(dB)) == (want_a, want_b)
    assert dA.shape == (DM, R) and dB.shape == (R, DM)


def test_the_seed_size_loss():
    assert core_lora.forward(core_lora.init_model(3, 6, 2)).loss == 1329684529960
