"""What the lora gate reports, line by line, at a size other than the seed's; the exact effect of each
planted fault; the overflow guards and where they refuse; progress and deadline checks; the memory bound."""

import hashlib
import re

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.core.q20 import S
from nxgates.errors import ConfigError, GateTimeout, ResourceError
from nxgates.gatekit import Progress, RunContext
from nxgates.gates.lora import fast as lora_fast
from nxgates.gates.lora import footprint as lora_footprint
from nxgates.gates.lora import gate as lora_gate
from nxgates.gates.lora import gradcheck as lora_gradcheck
from nxgates.gates.lora.footprint import chunk_elements
from tests.conftest import ctx
from tests.gates.seed_lora import cdiv, python_int_loss, seed_lora

ODD = {"T": 2, "DM": 5, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def lines(out, level="info"):
    return [i.text for i in out.lines() if getattr(i, "level", None) == level]


def checks(out):
    return {c.name: (c.passed, c.detail) for c in out.checks}


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
def test_the_report_at_an_odd_size(algorithm):
    out = lora_gate.run(ctx({**ODD, "algorithm": algorithm}))
    seed = seed_lora(2, 5, 2, 2097, 70)
    assert lines(out) == [
        "=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank 2) in Q20 INTEGER, no float ===",
        "",
        " params: base W frozen (25) + LoRA A,B trainable (20) = 444permil of full trained (PEFT) "
        f"L_q32={seed['loss_q']}",
        " gradcheck:",
        " A (lora): 10/10 (worst=1permil of max|grad|=118926)",
        " B (lora): 10/10 (worst=0permil of max|grad|=202361)",
        "",
        " LoRA gradcheck: 20/20 cells correct",
    ]
    assert checks(out) == {
        lora_gate.CHECK_A: (True, "10/10 cells within 70permil (worst=1permil)"),
        lora_gate.CHECK_B: (True, "10/10 cells within 70permil (worst=0permil)"),
        lora_gate.CHECK_FROZEN: (True, "W bit-identical after the run (25 cells)"),
    }
    verbose = lines(out, "verbose")
    assert len(verbose) == 20
    assert verbose[2] == (f"   A (lora) cell 2 ana={seed['A']['analytic'][2]} num={seed['A']['numeric'][2]} rel=1")
    assert verbose[10].startswith(f"   B (lora) cell 0 ana={seed['B']['analytic'][0]} ")
    assert lines(out, "detail") == []
    assert out.green == ("NX-INTFP-LORA verdict=GREEN 20/20 -- integer LoRA/PEFT PROVEN (frozen base + low-rank "
                         "adapter grads), no float.")
    assert out.red == "NX-INTFP-LORA verdict=RED 20/20 -- adapter Q-scaling bug or base W not frozen"
    m = out.metrics
    assert (m["loss_q"], m["trained_params"], m["total_params"], m["peft_permil"]) == (seed["loss_q"], 20, 45, 444)
    assert m["A"]["max_abs_grad"] == 118926 and m["B"]["worst_permil"] == 0


def test_detail_lines_name_exactly_the_cells_above_the_tolerance():
    out = lora_gate.run(ctx({**ODD, "tol_permil": 0}))
    seed = seed_lora(2, 5, 2, 2097, 0)
    above = [i for i in range(10) if lines(out, "verbose")[i].endswith("rel=1")]
    assert above == [2, 3, 6, 7]
    assert lines(out, "detail") == [
        f" A (lora) cell {i} ana={seed['A']['analytic'][i]} num={seed['A']['numeric'][i]} rel=1" for i in above]
    assert checks(out)[lora_gate.CHECK_A] == (False, "6/10 cells within 0permil (worst=1permil)")
    assert lora_gate.run(ctx({**ODD, "tol_permil": 1})).checks[0].passed  # rel == tol passes


def test_the_digest_fingerprints_the_loss_and_every_integer():
    out = lora_gate.run(ctx(ODD))
    h = hashlib.sha256(str(out.metrics["loss_q"]).encode())
    for key in ("A", "B"):
        h.update(np.array(out.metrics[key]["analytic"], dtype="<i8").tobytes())
        h.update(np.array(out.metrics[key]["numeric"], dtype="<i8").tobytes())
    assert out.digest == h.hexdigest() == "19b26ea9ca93c9de649750f36223b18f521c8e7f3e4838b7e62584aa34ac5eb2"


def test_the_digest_is_hashed_only_when_read(monkeypatch):
    """Start-up: a single run never reads the digest (--repeat does), so it never imports hashlib."""
    calls = []
    digest = lora_gate._digest
    monkeypatch.setattr(lora_gate, "_digest", lambda *args: calls.append(1) or digest(*args))
    out = lora_gate.run(ctx(ODD))
    assert calls == []
    assert out.digest == out.digest == lora_gate.run(ctx({**ODD, "algorithm": "naive"})).digest
    assert calls == [1, 1]


# ---- the planted faults do exactly what their table says -----------------------------------------------


def analytic(out, key):
    return out.metrics[key]["analytic"]


@pytest.mark.parametrize("size", [(2, 5, 2), (3, 6, 2)])  # cell 0 of A positive, then negative
def test_grad_bug_moves_one_cell_of_a_by_a_tenth_of_max_grad(size):
    params = {**ODD, "T": size[0], "DM": size[1], "R": size[2]}
    clean, bug = lora_gate.run(ctx(params)), lora_gate.run(ctx(params, fault="grad-bug"))
    want = analytic(clean, "A").copy()
    want[0] += max(abs(v) for v in want) // 10
    assert analytic(bug, "A") == want
    assert analytic(bug, "B") == analytic(clean, "B")


def test_grad_bug_moves_a_cell_by_one_when_every_gradient_is_tiny():
    m = core_lora.init_model(1, 1, 1)
    f = core_lora.forward(m)
    dA, _ = core_lora.backward(m, f)
    bugged, _ = lora_gate.planted_gradients("grad-bug", f, *core_lora.backward(m, f))
    assert int(bugged[0, 0]) - int(dA[0, 0]) == max(1, abs(int(dA[0, 0])) // 10)


def test_missing_rescale_leaves_one_product_of_db_undivided():
    m = core_lora.init_model(2, 5, 2)
    f = core_lora.forward(m)
    _, dB = core_lora.backward(m, f)
    _, bad = lora_gate.planted_gradients("missing-rescale", f, *core_lora.backward(m, f))
    term = int(f.h[0, 0]) * 2 * int(f.y[0, 0])
    want = dB.copy()
    want[0, 0] += term - cdiv(term, S)
    assert bad.tolist() == want.tolist()
    out = lora_gate.run(ctx(ODD, fault="missing-rescale"))
    assert [c.passed for c in out.checks] == [True, False, True]


def test_transposed_b_writes_db_with_swapped_indices():
    m = core_lora.init_model(2, 5, 2)
    f = core_lora.forward(m)
    _, dB = core_lora.backward(m, f)
    _, bad = lora_gate.planted_gradients("transposed-b", f, *core_lora.backward(m, f))
    assert bad.shape == dB.shape
    assert bad.reshape(-1).tolist() == dB.T.reshape(-1).tolist()


def test_train_base_reports_how_many_cells_of_w_moved():
    out = lora_gate.run(ctx(ODD, fault="train-base"))
    assert checks(out)[lora_gate.CHECK_FROZEN] == (False, "1 of 25 cells of W changed during the run")
    assert out.red.startswith("NX-INTFP-LORA verdict=RED 20/20")


def test_train_base_at_the_smallest_size_moves_the_only_cell():
    out = lora_gate.run(ctx({**ODD, "DM": 1, "R": 1}, fault="train-base"))
    assert checks(out)[lora_gate.CHECK_FROZEN] == (False, "1 of 1 cells of W changed during the run")


@pytest.mark.parametrize("shrink", [1, 128])
def test_grad_bug_moves_one_cell_of_a_by_a_tenth_of_max_grad_and_at_least_one(shrink):
    """x // 128 leaves max|dA| = 11: a tenth rounds to 1, and 1 is the smallest defect an integer has."""
    base = core_lora.init_model(3, 6, 2)
    m = core_lora.Model(base.x // shrink, base.W, base.A, base.B)
    f = core_lora.forward(m)
    clean, _ = core_lora.backward(m, f)
    bugged, _ = lora_gate.planted_gradients("grad-bug", f, *core_lora.backward(m, f))
    biggest = int(np.max(np.abs(clean)))
    shift = bugged - clean
    assert np.count_nonzero(shift) == 1
    assert shift[0, 0] == max(1, biggest // 10)


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


# ---- progress, deadlines, sizes --------------------------------------------------------------------------


class Recorder(Progress):
    def __init__(self):
        self.events = []
        self.done = 0

    def start(self, label, total):
        self.events.append((label, total))

    def advance(self, steps=1):
        self.done += steps


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
@pytest.mark.parametrize("T,DM,R", [(2, 5, 2), (3, 40, 7)])
def test_progress_counts_every_gradcheck_cell_once(algorithm, T, DM, R, monkeypatch):
    monkeypatch.setattr(lora_fast, "_proven_a", lambda *args: False)  # the guarded path too
    rec = Recorder()
    lora_gate.run(RunContext(params={**ODD, "T": T, "DM": DM, "R": R, "algorithm": algorithm}, progress=rec))
    assert rec.events == [("gradcheck cells", 2 * DM * R)]
    assert rec.done == 2 * DM * R  # A and B: DM * R cells each


def test_the_naive_path_checks_the_deadline_every_64_cells():
    rec = Recorder()
    seen = []

    class Clock(RunContext):
        def check_time(self):
            seen.append(rec.done)

    m = core_lora.init_model(2, 100, 2)
    lora_gradcheck.diffs_naive(m, m.A, 2097, Clock(params={}, progress=rec))
    assert seen == [64, 128, 192]


def test_an_expired_deadline_stops_a_run():
    with pytest.raises(GateTimeout):
        lora_gate.run(RunContext(params=ODD, deadline=0.0))


def test_rank_equal_to_width_is_allowed():
    lora_gate.validate({**ODD, "R": 5})
    with pytest.raises(ConfigError, match=r"^R=6 must not exceed DM=5 \(a LoRA rank is at most the width\)$"):
        lora_gate.validate({**ODD, "R": 6})


def test_the_memory_bound_asked_for_counts_three_copies_of_the_tensors_and_the_temporaries(monkeypatch):
    asked = []
    monkeypatch.setattr(lora_footprint, "require", lambda nbytes, what: asked.append((nbytes, what)))
    lora_gate.validate({**ODD, "T": 7, "DM": 11, "R": 3})
    tensors = 7 * 11 + 11 * 11 + 2 * 11 * 3
    chunks = 4 * 11 * (3 * 7 * 11) + 11 * 11 * 7 + 4 * 2 * 3 * 7 * 11  # every row of A at once: blocks and moves
    assert asked == [(8 * (3 * tensors + 12 * 7 * 11 + 4 * 7 * 3 + chunks), "lora at T=7 DM=11 R=3")]


def test_chunk_temporaries_are_capped_by_the_chunk_sizes_and_by_the_model():
    assert chunk_elements(3, 6, 2) == 4 * 6 * 36 + 11 * 6 * 3 + 4 * 2 * 2 * 3 * 6  # the seed: a few KiB
    assert chunk_elements(16, 256, 8) == 4 * 64 * 32768 + 11 * 256 * 16 + 4 * 2 * 8 * 16 * 256  # large
    assert chunk_elements(32, 1024, 16) == 4 * 4 * 524288 + 11 * 1024 * 32 + 4 * (1 << 20)  # xl: moves capped
    assert chunk_elements(16, 1000, 3) == 4 * 43 * 48000 + 11 * 1000 * 16 + 4 * 2 * 3 * 16 * 1000  # 43.7 rows
    assert chunk_elements(64, 4096, 64) == 4 * 1 * 64 * 64 * 4096 + 11 * 4096 * 64 + 4 * (1 << 20)  # a block
    # beyond the guarded cap: one row of A's guarded block is more than CHECKED_ELEMENTS


def test_a_tight_memory_limit_still_runs_the_seed_size(lora_params, monkeypatch):
    """The estimate once planned 64 MiB of chunks per worker at any size: a 250 MB ulimit -v refused even
    the seed's 3 x 6 model."""
    from nxgates.core import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 16 << 20)  # an 8 MiB budget
    lora_gate.validate({**lora_params, "workers": 1})
    with pytest.raises(ResourceError, match=r"lora at T=16 DM=256 R=8 needs about"):
        lora_gate.validate({**lora_params, "T": 16, "DM": 256, "R": 8, "workers": 1})


def test_the_smallest_model_reports_two_thirds_of_its_parameters_trained():
    out = lora_gate.run(ctx({**ODD, "T": 1, "DM": 1, "R": 1}))
    assert " params: base W frozen (1) + LoRA A,B trainable (2) = 666permil of full trained (PEFT) " in lines(out)[2]
    assert out.metrics["peft_permil"] == 666


def test_relative_error_is_per_mil_of_max_grad_and_of_one_when_every_gradient_is_zero():
    """The seed's ``maxabs = max(1, max|ana|)``: a zero gradient still gives a finite, exact rel."""
    g = lora_gradcheck.judge("A", np.zeros((1, 2), dtype=np.int64), np.array([2 * 5 * 3, 0]), 5, 70)
    assert (g.maxabs, g.numeric.tolist(), g.rel.tolist()) == (1, [3, 0], [3000, 0])
    g = lora_gradcheck.judge("A", np.array([1, 0]), np.array([0, 0]), 5, 70)
    assert (g.maxabs, g.rel.tolist()) == (1, [1000, 0])
    empty = lora_gradcheck.judge("A", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 5, 70)
    assert (empty.maxabs, empty.cells, empty.worst, empty.passed) == (1, 0, 0, True)


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
    proof = lora_fast._proven_a
    monkeypatch.setattr(lora_fast, "_proven_a", lambda *args: verdicts.append(proof(*args)) or verdicts[-1])
    with pytest.raises(q20.Q20Overflow, match=label):
        _cells_a(m, f)
    assert verdicts and not any(verdicts)
    monkeypatch.setattr(lora_fast, "_proven_a", lambda *args: False)
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
    proof = lora_fast._proven_b
    monkeypatch.setattr(lora_fast, "_proven_b", lambda *args: verdicts.append(proof(*args)) or verdicts[-1])
    with pytest.raises(q20.Q20Overflow, match=label):
        lora_fast.cells_b(m, f, delta, range(1), np.zeros(m.B.shape, np.int64))
    assert verdicts == [False]
    monkeypatch.setattr(lora_fast, "_proven_b", lambda *args: False)
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
        assert lora_fast._proven_b(f, delta)
        want = np.zeros(m.B.shape, np.int64)
        with monkeypatch.context() as patched:
            patched.setattr(lora_fast, "_proven_b", lambda *args: False)
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
    proof = lora_fast._proven_a
    monkeypatch.setattr(lora_fast, "_proven_a", lambda *args: verdicts.append(proof(*args)) or verdicts[-1])
    _cells_a(m, f)
    assert verdicts and all(verdicts)
