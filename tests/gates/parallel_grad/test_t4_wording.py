"""T4 with ``--ulp``: a file whose cells differ is never called BIT-IDENTICAL, and the gate itself refuses a
bound wider than one binade (a negated file must not pass)."""

import numpy as np
import pytest

from nxgates.errors import ConfigError
from nxgates.gates import parallel_grad as pg
from nxgates.gates.parallel_grad import gate
from tests.helpers import ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 2, "executor": "thread", "reduction": "tree"}


def saved(tmp_path, edit):
    path = tmp_path / "g.npy"
    pg.run(ctx(SEED, save_grads=str(path)))
    np.save(path, edit(np.load(path)))
    return path


def t4(out):
    (c,) = [c for c in out.checks if c.name == pg.T4]
    return c


def nudged(grads):
    """35 non-zero cells moved: 20 by one ULP up, 15 by two down."""
    flat = grads.reshape(-1)
    cells = np.flatnonzero(flat)[:35]
    flat[cells[:20]] = np.nextafter(flat[cells[:20]], np.float32(np.inf))
    down = np.nextafter(flat[cells[20:]], np.float32(-np.inf))
    flat[cells[20:]] = np.nextafter(down, np.float32(-np.inf))
    return grads


def test_cells_within_the_ulps_pass_without_being_called_identical(tmp_path):
    path = saved(tmp_path, nudged)
    c = t4(pg.run(ctx(SEED, compare_grads=str(path), ulp=2)))
    assert (c.passed, c.detail) == (True, f"within 2 ULP (35 cells differ from {path}, worst 2 ULP)")
    assert "BIT-IDENTICAL" not in c.name + c.detail


def test_an_identical_file_is_bit_identical_with_or_without_ulps(tmp_path):
    path = saved(tmp_path, lambda g: g)
    for ulp in (None, 0, 2):
        c = t4(pg.run(ctx(SEED, compare_grads=str(path), ulp=ulp)))
        assert c.passed and c.detail.endswith(", BIT-IDENTICAL")


@pytest.mark.parametrize("ulp", [gate.ULP_MAX + 1, 1 << 32, -1])
def test_the_gate_refuses_ulps_beyond_one_binade(tmp_path, ulp):
    path = saved(tmp_path, lambda g: -g)
    with pytest.raises(ConfigError, match=rf"--ulp {ulp} is out of range \[0, 8388608\]"):
        pg.run(ctx(SEED, compare_grads=str(path), ulp=ulp))


def test_a_negated_file_fails_at_the_widest_bound_naming_the_sign_flips(tmp_path):
    path = saved(tmp_path, lambda g: -g)
    c = t4(pg.run(ctx(SEED, compare_grads=str(path), ulp=gate.ULP_MAX)))
    assert not c.passed and "BIT-IDENTICAL" not in c.detail
    assert c.detail.endswith(" of opposite sign") and "(> 8388608)" in c.detail
