"""The lora gate's overflow guards: it refuses exactly where the seed's int64 would not hold the numbers,
and the fast path's a-priori proof never lets through what a guard refuses."""

import re

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.core.lora import fast as lora_fast
from nxgates.core.q20 import S
from nxgates.errors import ResourceError
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ODD, ctx
from tests.oracles.seed_lora import python_int_loss, seed_lora

# ---- overflow: refuse exactly where the seed's int64 would not hold the numbers --------------------------


def seed_worst_loss(T, DM, R, delta):
    """The largest ``L(+-delta)`` the seed forms, in Python ints (which never wrap)."""
    m = core_lora.init_model(T, DM, R)
    x, W, A, B = (v.tolist() for v in (m.x, m.W, m.A, m.B))
    worst = 0
    for tensor in (A, B):
        for row in tensor:
            for c, save in enumerate(row):
                for moved in (save + delta, save - delta):
                    row[c] = moved
                    worst = max(worst, python_int_loss(x, W, A, B))
                row[c] = save
    return worst


DELTAS_NEAR_THE_LIMIT = [(3, 6, 2, d) for d in (3 << 29, 1 << 30, 3 << 30, 5 << 30, 7 << 30, 1 << 31, 3 << 31,
                                                5 << 31, 1 << 32)]
DELTAS_NEAR_THE_LIMIT += [(4, 2, 2, 7 << 30), (4, 2, 2, 1 << 33)]  # only moving A takes L(+-delta) past 2^62


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
@pytest.mark.parametrize("T,DM,R,delta", DELTAS_NEAR_THE_LIMIT)
def test_a_run_refuses_where_the_seed_loss_would_leave_the_int64_range_and_is_exact_below(T, DM, R, delta,
                                                                                        algorithm):
    params = {**ODD, "T": T, "DM": DM, "R": R, "delta": delta, "algorithm": algorithm}
    if seed_worst_loss(T, DM, R, delta) >= q20.SQUARES_LIMIT:  # the loss, a sum of squares, may pass 2^62
        with pytest.raises(ResourceError, match="int64 overflow guard"):
            lora_gate.run(ctx(params))
        return
    try:
        out = lora_gate.run(ctx(params))
    except ResourceError:
        return  # the guards are conservative: refusing a little early is allowed, a wrong number is not
    seed = seed_lora(T, DM, R, delta, 70)
    for key in ("A", "B"):
        assert out.metrics[key]["numeric"] == seed[key]["numeric"]


@pytest.mark.parametrize("size,algorithm,fault,delta,limit,what", [
    ((3, 6, 2), "fast", None, 1, 1 << 20, "x@W"),
    ((3, 6, 2), "fast", None, 1, 1 << 40, "L = sum y^2"),
    ((3, 6, 2), "fast", None, 1, 1329684529961, "L(+-delta)"),  # L itself fits; some L(+-delta) is above it
    ((3, 6, 2), "fast", None, 1 << 28, 1 << 41, "x * delta"),
    ((1, 1, 1), "fast", None, 1 << 14, 5 << 34, "x@A +- x*delta"),
    ((3, 6, 2), "fast", "missing-rescale", 1, 1 << 42, "|num - ana| * 1000"),
    ((3, 6, 2), "naive", None, 1, 1 << 41, "Lp - Lm"),
    ((3, 6, 2), "naive", None, 1 << 28, 1 << 41, "x@A"),
])
def test_the_first_guard_to_trip_names_its_computation(monkeypatch, size, algorithm, fault, delta, limit, what):
    """With the limit scaled down, the refusal says which intermediate would not have fit."""
    monkeypatch.setattr(q20, "LIMIT", limit)
    monkeypatch.setattr(q20, "SQUARES_LIMIT", limit)  # scaled alike: the order the guards trip in is the test
    T, DM, R = size
    params = {**ODD, "T": T, "DM": DM, "R": R, "delta": delta, "algorithm": algorithm}
    with pytest.raises(ResourceError, match=rf"tripped in {re.escape(what)} \("):
        lora_gate.run(ctx(params, fault=fault))

# ---- the fast path's a-priori proof agrees with the per-op guards at their edges -------------------------


def _crafted(T, DM, d, b, acc_y, xw, loss):
    """R=1, every x = d and delta = S, so each cell of A moves h by exactly +-d (acc_h = h = 0); B, the
    unmoved h@B sums and x@W are constants. The kernels accept any such model; the gate's own never gets here."""
    def full(v):
        return np.full((T, DM), v, np.int64)

    m = core_lora.Model(x=full(d), W=np.zeros((DM, DM), np.int64), A=np.zeros((DM, 1), np.int64),
                   B=np.full((1, DM), b, np.int64))
    y = full(xw + int(q20.tdiv(np.int64(acc_y), S)))
    f = core_lora.Forward(xw=full(xw), acc_h=np.zeros((T, 1), np.int64), h=np.zeros((T, 1), np.int64),
                     acc_y=full(acc_y), y=y, loss=loss)
    return m, f


def _cells_a(m, f):
    out = np.zeros(m.A.shape, np.int64)
    lora_fast.cells_a(m, f, S, range(m.A.shape[1]), out, lambda n: None)
    return out


_M = 1 << 10  # how far y moves in the loss edges: small, so only L(+-delta) is near its limit
PROOF_EDGES = {  # (T, DM, d, b, acc_y, xw, loss): each exactly at the edge of one guard of the checked path
    "h@B moved: the unmoved sum": ((1, 1, 1, 1, q20.LIMIT - 1, 0, 0), "h@B moved"),
    "h@B moved: the move dh*B": ((1, 1, 1, q20.LIMIT - 1, 1, 0, 0), "h@B moved"),
    "(yp - ym)(yp + ym)": ((1, 1, 1 << 30, S, 0, 1 << 30, 0), r"\(yp - ym\)\(yp \+ ym\)"),
    "its sum over DM": ((1, 4, 1 << 29, S, 0, 1 << 29, 0), "Lp - Lm"),
    "its sum over T": ((4, 1, 1 << 29, S, 0, 1 << 29, 0), "Lp - Lm"),
    "L(+-delta), y = 0": ((1, 1, _M, S, 0, 0, q20.SQUARES_LIMIT - _M**2), r"L\(\+-delta\)"),
    "L(+-delta) over DM": ((1, 4, _M, S, 0, 0, q20.SQUARES_LIMIT - 4 * _M**2), r"L\(\+-delta\)"),
    "L(+-delta) over T": ((4, 1, _M, S, 0, 0, q20.SQUARES_LIMIT - 4 * _M**2), r"L\(\+-delta\)"),
    "L(+-delta), large y": ((1, 1, _M, S, 0, 1 << 30, q20.SQUARES_LIMIT - 2 * (1 << 30) * _M - _M**2),
                            r"L\(\+-delta\)"),
    # the proof's bound meets the limit exactly (y moves by 8, its bound e = 8 + 2): the real L(+delta) is
    # 36 below the limit, but the guard's float64 sum rounds it up to the limit, so the guard refuses
    "L(+-delta), the bound at the limit": ((1, 1, 8, S, 0, 0, q20.SQUARES_LIMIT - 10**2), r"L\(\+-delta\)"),
}


@pytest.mark.parametrize("edge", PROOF_EDGES)
def test_the_proof_never_lets_through_what_a_guard_refuses(edge, monkeypatch):
    """The proven path skips the per-op guards; at each guard's edge the checked path refuses (exit 2 in the
    gate), so the proof must say no there, or the gate would give a number where it must refuse."""
    case, label = PROOF_EDGES[edge]
    m, f = _crafted(*case)
    verdicts = []
    proof = lora_fast.proven_a
    monkeypatch.setattr(lora_fast, "proven_a", lambda *args: verdicts.append(proof(*args)) or verdicts[-1])
    with pytest.raises(q20.Q20Overflow, match=label):
        _cells_a(m, f)
    assert verdicts and not any(verdicts)
    monkeypatch.setattr(lora_fast, "proven_a", lambda *args: False)
    with pytest.raises(q20.Q20Overflow, match=label):
        _cells_a(m, f)  # the checked path on its own: the edge is that guard's


def _crafted_b(T, DM, hv, delta, acc_y, xw, loss):
    """R=1 with every h = hv, so each cell of B moves its column of h@B by exactly +-hv * delta; the unmoved
    h@B sums and x@W are constants (cells_b reads only the forward)."""
    def full(v, cols=DM):
        return np.full((T, cols), v, np.int64)

    m = core_lora.Model(x=full(0), W=np.zeros((DM, DM), np.int64), A=np.zeros((DM, 1), np.int64),
                   B=np.zeros((1, DM), np.int64))
    y = full(xw + int(q20.tdiv(np.int64(acc_y), S)))
    f = core_lora.Forward(xw=full(xw), acc_h=full(0, 1), h=full(hv, 1), acc_y=full(acc_y), y=y, loss=loss)
    return m, f, delta


PROOF_EDGES_B = {  # (T, DM, hv, delta, acc_y, xw, loss): each exactly at the edge of one guard of cells_b
    "h * delta": ((1, 1, 1 << 22, 1 << 40, 0, 0, 0), r"h \* delta"),
    "h@B + h*delta": ((1, 1, 1, 1, q20.LIMIT - 1, 0, 0), r"h@B \+ h\*delta"),
    "(yp - ym)(yp + ym)": ((1, 1, 1 << 30, S, 0, 1 << 30, 0), r"\(yp - ym\)\(yp \+ ym\)"),
    "its sum over T": ((4, 1, 1 << 29, S, 0, 1 << 29, 0), "Lp - Lm"),
    "its sum over T, large y": ((4, 1, 1 << 10, S, 0, 1 << 48, 0), "Lp - Lm"),  # 4 x 2^11 x 2^49 = 2^62
    "L(+-delta), y = 0": ((1, 1, _M, S, 0, 0, q20.SQUARES_LIMIT - _M**2), r"L\(\+-delta\)"),
    "L(+-delta) over T": ((4, 3, _M, S, 0, 0, q20.SQUARES_LIMIT - 4 * _M**2), r"L\(\+-delta\)"),
    # the proof's bound meets the limit exactly (y moves by 8, its bound e = 8 + 2), as for A
    "L(+-delta), the bound at the limit": ((1, 1, 8, S, 0, 0, q20.SQUARES_LIMIT - 10**2), r"L\(\+-delta\)"),
    "L(+-delta), large y": ((1, 1, _M, S, 0, 1 << 30, q20.SQUARES_LIMIT - 2 * (1 << 30) * _M - _M**2),
                            r"L\(\+-delta\)"),
}


@pytest.mark.parametrize("edge", PROOF_EDGES_B)
def test_the_proof_for_b_never_lets_through_what_a_guard_refuses(edge, monkeypatch):
    """As for A: the proven path of B skips the per-op guards, so at each guard's edge it must say no."""
    case, label = PROOF_EDGES_B[edge]
    m, f, delta = _crafted_b(*case)
    verdicts = []
    proof = lora_fast.proven_b
    monkeypatch.setattr(lora_fast, "proven_b", lambda *args: verdicts.append(proof(*args)) or verdicts[-1])
    with pytest.raises(q20.Q20Overflow, match=label):
        lora_fast.cells_b(m, f, delta, range(1), np.zeros(m.B.shape, np.int64))
    assert verdicts == [False]
    monkeypatch.setattr(lora_fast, "proven_b", lambda *args: False)
    with pytest.raises(q20.Q20Overflow, match=label):
        lora_fast.cells_b(m, f, delta, range(1), np.zeros(m.B.shape, np.int64))  # the edge is that guard's


def test_the_proof_for_b_holds_and_its_path_equals_the_checked_one(monkeypatch):
    """At an odd size and nearer the int64 bound (every y moved by 2^28: each term about 2^58), the proven
    path of B and the guarded one give the same integers, in any block of (k, t)."""
    for T, DM, R, delta, xw in ((5, 13, 3, 2097, None), (3, 4, 1, S, (1 << 28) + 12345)):
        m = core_lora.init_model(T, DM, R)
        f = core_lora.forward(m)
        if xw is not None:  # crafted: y moves from about 2^28 by about 2^28, each term's 58 bits all in use
            m, f, delta = _crafted_b(T, DM, (1 << 28) + 777, delta, 0, xw, T * DM * xw * xw)
        assert lora_fast.proven_b(f, delta)
        want = np.zeros(m.B.shape, np.int64)
        with monkeypatch.context() as patched:
            patched.setattr(lora_fast, "proven_b", lambda *args: False)
            lora_fast.cells_b(m, f, delta, range(m.B.shape[0]), want)
        for elements in (1, 2 * DM, T * DM, 1 << 16):  # one (k, t) a block, uneven blocks of t, blocks of k
            monkeypatch.setattr(lora_fast, "MOVED_ELEMENTS", elements)
            got = np.zeros(m.B.shape, np.int64)
            lora_fast.cells_b(m, f, delta, range(m.B.shape[0]), got)
            assert got.tolist() == want.tolist()
        assert np.count_nonzero(want) > want.size // 2


def test_the_proof_holds_for_an_ordinary_model(monkeypatch):
    m = core_lora.init_model(2, 3, 2)
    f = core_lora.forward(m)
    verdicts = []
    proof = lora_fast.proven_a
    monkeypatch.setattr(lora_fast, "proven_a", lambda *args: verdicts.append(proof(*args)) or verdicts[-1])
    _cells_a(m, f)
    assert verdicts and all(verdicts)
