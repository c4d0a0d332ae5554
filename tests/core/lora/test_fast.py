"""The fast gradcheck (nxgates/core/lora/fast.py): its blocks, the distinct moves it shares between cells, the
a priori proofs and the loss up to 2^63, and the same integers as the seed's whole forwards whatever the blocks,
the chunks, the columns asked for or the path (proven or guarded)."""

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.core.lora import fast, gradcheck
from nxgates.core.lora import gradcheck as lora_gradcheck
from nxgates.gatekit import Progress, RunContext


class Counting(Progress):
    def __init__(self) -> None:
        self.done = 0

    def advance(self, steps: int = 1) -> None:
        self.done += steps


class CountingContext(RunContext):
    def __init__(self) -> None:
        super().__init__(params={}, progress=Counting())
        self.checks = 0

    def check_time(self) -> None:
        self.checks += 1


def _naive(T, DM, R, delta):
    m = core_lora.init_model(T, DM, R)
    plain = RunContext(params={})
    return gradcheck.diffs_naive(m, m.A, delta, plain), gradcheck.diffs_naive(m, m.B, delta, plain)


def _model(T, DM, R):
    m = core_lora.init_model(T, DM, R)
    return m, core_lora.forward(m)


def _blocks(R, T, per):
    return [((ks.start, ks.stop), [(ts.start, ts.stop) for ts in t_blocks]) for ks, t_blocks in fast._blocks(R, T, per)]


def test_blocks_take_several_k_when_every_t_fits():
    # 2^16 // 1000 = 65 rows of t per block, T = 10 fits: 65536 // (10 * 1000) = 6 values of k per block
    assert _blocks(14, 10, 1000) == [((0, 6), [(0, 10)]), ((6, 12), [(0, 10)]), ((12, 14), [(0, 10)])]


def test_blocks_take_one_k_in_blocks_of_t_when_its_rows_do_not_fit():
    # 2^16 // 4096 = 16 rows of t per block, T = 40: one k at a time
    assert _blocks(2, 40, 4096) == [((0, 1), [(0, 16), (16, 32), (32, 40)]), ((1, 2), [(0, 16), (16, 32), (32, 40)])]


def test_blocks_take_one_row_when_one_row_exceeds_the_block():
    assert _blocks(2, 3, 1 << 17) == [((0, 1), [(0, 1), (1, 2), (2, 3)]), ((1, 2), [(0, 1), (1, 2), (2, 3)])]


def test_blocks_at_exactly_one_row_of_t_per_block():
    rows = [(0, 1), (1, 2)]
    assert _blocks(3, 2, 1 << 16) == [((0, 1), rows), ((1, 2), rows), ((2, 3), rows)]
    assert _blocks(3, 2, 1 << 15) == [((0, 1), [(0, 2)]), ((1, 2), [(0, 2)]), ((2, 3), [(0, 2)])]
    assert _blocks(3, 2, 1 << 14) == [((0, 2), [(0, 2)]), ((2, 3), [(0, 2)])]


def test_distinct_shifts_per_t_with_where_each_cell_sits():
    shift = np.array([[3, 0], [-1, 2], [3, 2]], dtype=np.int64)  # (DM=3, T=2)
    values, where_plus, where_minus = fast._distinct_shifts(shift)
    # t=0: +-{3, -1, 3} = {-3, -1, 1, 3}; t=1: +-{0, 2, 2} = {-2, 0, 2}, padded with its largest
    assert values.tolist() == [[-3, -1, 1, 3], [-2, 0, 2, 2]]
    assert where_plus.tolist() == [[3, 1, 3], [1, 2, 2]]
    assert where_minus.tolist() == [[0, 2, 0], [1, 0, 0]]
    for t in range(2):
        assert values[t, where_plus[t]].tolist() == shift[:, t].tolist()
        assert values[t, where_minus[t]].tolist() == (-shift[:, t]).tolist()


def test_distinct_shifts_of_a_single_value():
    values, where_plus, where_minus = fast._distinct_shifts(np.zeros((2, 1), np.int64))
    assert (values.tolist(), where_plus.tolist(), where_minus.tolist()) == ([[0]], [[0, 0]], [[0, 0]])


def test_x_shifts_are_x_times_delta_transposed_with_their_distinct_values():
    m, _ = _model(2, 3, 1)
    shift, values, where_plus, where_minus = fast.x_shifts(m, 7)
    assert shift.tolist() == (m.x.T * 7).tolist()
    assert values.shape[0] == 2 and where_plus.shape == (2, 3) and where_minus.shape == (2, 3)
    assert np.take_along_axis(values, where_plus, axis=1).tolist() == (m.x * 7).tolist()


def test_x_shifts_refuse_x_times_delta_beyond_the_guard():
    m, _ = _model(1, 2, 1)
    with pytest.raises(q20.Q20Overflow, match=r"^int64 overflow guard tripped in x \* delta \("):
        fast.x_shifts(m, 1 << 60)


def test_sum_abs_is_exact_in_int64_and_beyond():
    assert fast._sum_abs(np.array([[3, -4], [0, -5]], dtype=np.int64)) == 12
    big = np.array([(1 << 62) - 1, -(1 << 62) + 1, 5], dtype=np.int64)  # the sum needs more than int64
    assert fast._sum_abs(big) == 2 * ((1 << 62) - 1) + 5
    assert type(fast._sum_abs(big)) is int
    edge = np.array([1 << 60, 1 << 60, -(1 << 60), -(1 << 60) + 1], dtype=np.int64)  # max * size = 2^62
    assert fast._sum_abs(edge) == (1 << 62) - 1
    assert fast._sum_abs(np.array([[-3, 4], [0, -5]], np.int64)) == 12
    assert fast._sum_abs(np.full(4, -(1 << 61), np.int64)) == 1 << 63  # 2^63 does not fit int64: Python ints take over


@pytest.mark.parametrize("T,DM,R,delta", [(3, 6, 2, 2097), (5, 7, 3, 1000), (2, 4, 4, 1 << 20), (1, 1, 1, 3)])
def test_fast_diffs_equal_the_seeds_whole_forwards(T, DM, R, delta):
    want_a, want_b = _naive(T, DM, R, delta)
    m, f = _model(T, DM, R)
    c = CountingContext()
    got_a = fast.diffs_fast_a(m, f, delta, c)
    assert got_a.reshape(-1).tolist() == want_a.tolist()
    assert c.progress.done == DM * R
    assert c.checks >= 1
    got_b = fast.diffs_fast_b(m, f, delta, c)
    assert got_b.reshape(-1).tolist() == want_b.tolist()
    assert c.progress.done == 2 * DM * R
    assert got_a.shape == (DM, R) and got_b.shape == (R, DM)


def test_small_blocks_give_the_same_integers(monkeypatch):
    want_a, want_b = _naive(5, 7, 3, 1000)
    monkeypatch.setattr(fast, "MOVES_ELEMENTS", 12)  # one column of A's moves per block
    monkeypatch.setattr(fast, "MOVED_ELEMENTS", 8)  # one k, one t at a time
    m, f = _model(5, 7, 3)
    ticks = []
    out = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert ticks == [7, 7, 7]
    assert fast.diffs_fast_b(m, f, 1000, RunContext(params={})).reshape(-1).tolist() == want_b.tolist()


def test_the_guarded_path_gives_the_same_integers(monkeypatch):
    want_a, want_b = _naive(5, 7, 3, 1000)
    monkeypatch.setattr(fast, "proven_a", lambda *args: False)
    monkeypatch.setattr(fast, "proven_b", lambda *args: False)
    m, f = _model(5, 7, 3)
    ticks = []
    out = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert sum(ticks) == 21
    assert fast.diffs_fast_b(m, f, 1000, RunContext(params={})).reshape(-1).tolist() == want_b.tolist()


def test_the_guarded_path_with_a_rank_above_the_rows(monkeypatch):
    want_a, _ = _naive(2, 5, 4, 777)
    monkeypatch.setattr(fast, "proven_a", lambda *args: False)
    m, f = _model(2, 5, 4)
    out = np.zeros((5, 4), np.int64)
    fast.cells_a(m, f, 777, range(4), out, lambda n: None)
    assert out.reshape(-1).tolist() == want_a.tolist()


def test_the_guarded_path_in_small_chunks_gives_the_same_integers(monkeypatch):
    want_a, _ = _naive(5, 7, 3, 1000)
    monkeypatch.setattr(fast, "proven_a", lambda *args: False)
    monkeypatch.setattr(fast, "MOVES_ELEMENTS", 3 * 3 * 5)  # three rows of A per chunk (rows, R, T)
    monkeypatch.setattr(fast, "CHECKED_ELEMENTS", 2 * 3 * 5 * 7)  # two rows per piece (rows, R, T, DM)
    m, f = _model(5, 7, 3)
    ticks = []
    out = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), out, ticks.append)  # one column per block: 6 rows per piece
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert ticks == [6, 1] * 3
    ticks = []
    out = np.zeros((7, 3), np.int64)
    fast._cells_a_guarded(m, f, fast.x_shifts(m, 1000)[0], slice(0, 3), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert ticks == [6, 3, 6, 3, 3]  # rows 0-1, 2 | 3-4, 5 | 6, R = 3 cells each


def test_the_guarded_path_takes_one_row_per_piece_when_one_fills_it(monkeypatch):
    monkeypatch.setattr(fast, "proven_a", lambda *args: False)
    monkeypatch.setattr(fast, "CHECKED_ELEMENTS", 3 * 5 * 7 + 1)
    m, f = _model(5, 7, 3)
    ticks = []
    fast.cells_a(m, f, 1000, range(3), np.zeros((7, 3), np.int64), ticks.append)
    assert ticks == [3] * 7


def test_cells_fill_only_the_columns_and_rows_asked_for(monkeypatch):
    want_a, want_b = _naive(5, 7, 3, 1000)
    want_a, want_b = want_a.reshape(7, 3), want_b.reshape(3, 7)
    m, f = _model(5, 7, 3)
    for proven in (True, False):
        if not proven:
            monkeypatch.setattr(fast, "proven_a", lambda *args: False)
            monkeypatch.setattr(fast, "proven_b", lambda *args: False)
        out_a = np.full((7, 3), -1, np.int64)
        ticks = []
        fast.cells_a(m, f, 1000, range(1, 3), out_a, ticks.append, fast.x_shifts(m, 1000))
        assert out_a[:, 0].tolist() == [-1] * 7
        assert out_a[:, 1:].tolist() == want_a[:, 1:].tolist()
        assert sum(ticks) == 14
        out_b = np.full((3, 7), -1, np.int64)
        fast.cells_b(m, f, 1000, range(1, 2), out_b)
        assert out_b[[0, 2]].tolist() == [[-1] * 7] * 2
        assert out_b[1].tolist() == want_b[1].tolist()


def test_cells_b_past_the_first_row_in_small_blocks(monkeypatch):
    _, want_b = _naive(5, 7, 3, 1000)
    monkeypatch.setattr(fast, "MOVED_ELEMENTS", 7)  # one k and one t per block
    m, f = _model(5, 7, 3)
    out = np.full((3, 7), -1, np.int64)
    fast.cells_b(m, f, 1000, range(1, 3), out)
    assert out[1:].reshape(-1).tolist() == want_b.tolist()[7:]
    assert out[0].tolist() == [-1] * 7


def test_the_proofs_hold_for_an_ordinary_model():
    m, f = _model(3, 6, 2)
    assert fast.proven_b(f, 2097)
    shift, values, _, _ = fast.x_shifts(m, 2097)
    moves = q20.tdiv(f.acc_h.T[:, :, None] + values[None], q20.S) - f.h.T[:, :, None]
    assert fast.proven_a(m, f, [moves], fast._sum_abs(f.y))


def test_the_proofs_fail_for_moves_near_the_limit():
    m, f = _model(3, 6, 2)
    assert not fast.proven_b(f, 1 << 40)
    assert not fast._moves_fit(f, q20.LIMIT, 1, 0)
    assert fast._moves_fit(f, 0, 1, 0)


def test_proven_a_in_blocks_of_one_k_counts_each_columns_cells(monkeypatch):
    want_a, _ = _naive(5, 7, 3, 1000)
    monkeypatch.setattr(fast, "MOVED_ELEMENTS", 8)  # one k and one t per block, all of A's columns in one call
    m, f = _model(5, 7, 3)
    ticks = []
    out = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert ticks == [7, 7, 7]


def test_a_block_of_columns_holds_moves_elements_of_distinct_moves(monkeypatch):
    m, f = _model(5, 7, 3)
    V = fast.x_shifts(m, 1000)[1].shape[1]
    monkeypatch.setattr(fast, "MOVES_ELEMENTS", 2 * 5 * V)  # (columns, T, V): two columns per block
    ticks = []
    fast.cells_a(m, f, 1000, range(3), np.zeros((7, 3), np.int64), ticks.append)
    assert ticks == [14, 7]


def test_cells_a_uses_the_shifts_it_is_given(monkeypatch):
    m, f = _model(5, 7, 3)
    shifts = fast.x_shifts(m, 1000)
    want = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), want, lambda n: None)

    def again(*args):
        raise AssertionError("x_shifts made again")

    monkeypatch.setattr(fast, "x_shifts", again)
    out = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), out, lambda n: None, shifts)
    assert out.tolist() == want.tolist()


def _expected_diffs(T, DM, R, delta=2097):
    """``L(+d) - L(-d)`` per cell from the naive path (a whole forward per perturbation)."""
    m = core_lora.init_model(T, DM, R)
    plain = RunContext(params={})
    return lora_gradcheck.diffs_naive(m, m.A, delta, plain), lora_gradcheck.diffs_naive(m, m.B, delta, plain)


def test_cells_a_ticks_once_per_cell_of_its_columns():
    T, DM, R = 3, 7, 5
    want_a, _ = _expected_diffs(T, DM, R)
    m = core_lora.init_model(T, DM, R)
    out = np.zeros((DM, R), np.int64)
    ticks = []
    fast.cells_a(m, core_lora.forward(m), 2097, range(2, 4), out, ticks.append)
    assert sum(ticks) == DM * 2
    assert out[:, 2:4].tolist() == want_a.reshape(DM, R)[:, 2:4].tolist()
    assert not out[:, :2].any() and not out[:, 4:].any()


def test_the_proven_path_equals_the_checked_path(monkeypatch):
    T, DM, R = 64, 256, 5
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    plain = RunContext(params={})
    proven = fast.diffs_fast_a(m, f, 2097, plain)
    monkeypatch.setattr(fast, "proven_a", lambda *args: False)  # every chunk through the per-op guards
    checked = fast.diffs_fast_a(m, f, 2097, plain)
    assert proven.tolist() == checked.tolist()
    assert np.count_nonzero(proven[:, 4]) > DM // 2  # the last column is really computed


def _random_model(T, DM, R, seed):
    """Every entry its own value: no two cells share a move of h, so the proven path's memo of distinct moves
    saves nothing and must still give the seed's integers (the seed's x takes 11 values only)."""
    rng = np.random.default_rng(seed)

    def q(*shape, scale):
        return rng.integers(-scale, scale + 1, size=shape, dtype=np.int64)

    return core_lora.Model(q(T, DM, scale=q20.S), q(DM, DM, scale=q20.S // 8), q(DM, R, scale=q20.S // 8),
                      q(R, DM, scale=q20.S // 8))


@pytest.mark.parametrize(("T", "DM", "R", "seed"), [(5, 9, 3, 1), (2, 31, 1, 2), (7, 4, 4, 3)])
def test_the_proven_path_gives_the_seeds_integers_when_no_move_repeats(T, DM, R, seed):
    m = _random_model(T, DM, R, seed)
    f = core_lora.forward(m)
    dhs = [(q20.tdiv(f.acc_h.T[None] + sign * m.x.T[:, None, :] * 2097, q20.S) - f.h.T[None]) for sign in (1, -1)]
    assert np.unique(np.concatenate([d[:, 0, 0] for d in dhs])).size > DM  # the moves of h[0, 0] barely repeat
    assert fast.proven_a(m, f, dhs, int(np.abs(f.y).sum()))
    got = fast.diffs_fast_a(m, f, 2097, RunContext(params={}))
    assert got.reshape(-1).tolist() == _python_int_diffs(m, m.A, 2097)


@pytest.mark.parametrize(("T", "DM", "R", "moves", "checked"),
                         [(3, 17, 3, 1, 1), (3, 17, 3, 7, 5), (3, 17, 3, 3, 1), (3, 17, 3, 1 << 20, 1 << 21),
                          (1, 5, 1, 2, 1), (3, 17, 3, 11, 1), (3, 17, 3, 8, 2), (3, 17, 1, 1, 2), (1, 5, 1, 2, 2)])
def test_any_chunk_gives_the_same_integers(T, DM, R, moves, checked, monkeypatch):
    """Columns of A go in blocks sized by their distinct moves; on the guarded path, rows go in chunks sized
    by their per-cell moves and in pieces sized by its temporaries. Blocks of one column, uneven ones, chunks
    of 1 row, uneven pieces and everything at once give the same integers, every cell ticked once, in the
    pieces planned (also where R * T is 1)."""
    want_a, _ = _expected_diffs(T, DM, R)
    monkeypatch.setattr(fast, "MOVES_ELEMENTS", moves * R * T)
    monkeypatch.setattr(fast, "CHECKED_ELEMENTS", checked * R * T * DM)
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    V = fast._distinct_shifts(q20.mul(m.x.T, 2097))[0].shape[1]
    block = max(1, moves * R * T // (T * V))
    blocks = [min(block, R - k) for k in range(0, R, block)]
    for proven in (True, False):
        monkeypatch.setattr(fast, "proven_a", lambda *args, p=proven: p)
        out, ticks = np.zeros((DM, R), np.int64), []
        fast.cells_a(m, f, 2097, range(R), out, ticks.append)
        assert out.reshape(-1).tolist() == want_a.tolist()
        assert sum(ticks) == DM * R
        if proven:  # a tick per block of columns the kernel evaluates at once
            assert all(n % DM == 0 for n in ticks) and len(ticks) >= len(blocks)
            continue
        planned = []
        for b in blocks:
            step, sub = max(1, moves * R // b), max(1, checked * R // b)
            chunks = [min(step, DM - i) for i in range(0, DM, step)]
            planned += [b * min(sub, c - j) for c in chunks for j in range(0, c, sub)]
        assert ticks == planned


@pytest.mark.parametrize("block", ["one (k, t) at a time", "uneven blocks of t", "blocks of k", "all at once"])
def test_any_block_of_moved_rows_gives_the_same_integers(block, monkeypatch):
    """The proven path evaluates the moved rows of y in blocks of (k, t) sized by MOVED_ELEMENTS: one (k, t)
    at a time, 2 of the 5 values of t (the last block shorter), 2 of the 3 values of k with every t, and all
    in one block give the seed's integers."""
    T, DM, R = 5, 13, 3
    want_a, _ = _expected_diffs(T, DM, R)
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    values, _, _ = fast._distinct_shifts(q20.mul(m.x.T, 2097))
    per_t = values.shape[1] * DM
    elements = {"one (k, t) at a time": 1, "uneven blocks of t": 2 * per_t, "blocks of k": 2 * T * per_t,
                "all at once": R * T * per_t}[block]
    monkeypatch.setattr(fast, "MOVED_ELEMENTS", elements)
    proven = _spy(monkeypatch, "_moved_a_unchecked")
    out, ticks = np.zeros((DM, R), np.int64), []
    fast.cells_a(m, f, 2097, range(R), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert proven == [1]  # the proven path ran (one block of columns)
    assert sum(ticks) == DM * R and all(n % DM == 0 for n in ticks)  # every cell once, a block of k a tick


def _spy(monkeypatch, name):
    """Count the calls of ``fast.<name>``, which still runs."""
    calls, real = [], getattr(fast, name)

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(fast, name, counted)
    return calls


def test_rows_of_x_with_different_numbers_of_distinct_values_give_python_integers(monkeypatch):
    """Row 0 of x repeats one value, row 1 holds +-v pairs, row 2 every value its own: the moves are padded to
    the longest row, and each cell must still gather its own, with either sign."""
    DM, R = 6, 2
    base = _random_model(3, DM, R, 7)
    x = np.array([[5 * q20.S // 16] * DM,
                  [v * q20.S // 8 for v in (1, -1, 3, -3, 1, 0)],
                  [v * q20.S // 32 for v in (7, -2, 5, 11, -13, 3)]], np.int64)
    m = core_lora.Model(x, base.W, base.A, base.B)
    f = core_lora.forward(m)
    values, where_plus, where_minus = fast._distinct_shifts(q20.mul(m.x.T, 2097))
    assert values.shape == (3, 12)  # the longest row's distinct values, no more
    assert [len(np.unique(row)) for row in values] == [2, 5, 12]  # +-v; +-v, +-3v and 0; 6 values and negatives
    assert (values[np.arange(3)[:, None], where_plus] == m.x * 2097).all()
    assert (values[np.arange(3)[:, None], where_minus] == -m.x * 2097).all()
    proven = _spy(monkeypatch, "_moved_a_unchecked")
    got = fast.diffs_fast_a(m, f, 2097, RunContext(params={}))
    assert got.reshape(-1).tolist() == _python_int_diffs(m, m.A, 2097)
    assert proven == [1]


@pytest.mark.parametrize(("T", "DM"), [(4, 37), (1, 11), (2, 1000)])
def test_the_seeds_x_moves_h_by_11_distinct_values_whatever_the_size(T, DM):
    """The memo's whole point: +-x * delta takes 11 values per row t (x's 11, symmetric about 0), found once
    for every row of A; fewer where a row of x holds fewer of them."""
    m = core_lora.init_model(T, DM, 1)
    values, where_plus, where_minus = fast._distinct_shifts(q20.mul(m.x.T, 2097))
    assert values.shape == (T, 11)
    assert (np.diff(values, axis=1) >= 0).all() and (np.diff(values, axis=1) > 0).any()
    assert where_plus.shape == where_minus.shape == (T, DM)
    three_rows = fast._distinct_shifts(q20.mul(m.x.T[:3], 2097))[0]  # x[0, :3] = -0.3, 0.2, -0.4: 6
    assert three_rows.shape == (T, 6)


def _python_int_diffs(m, tensor, delta):
    """``L(+d) - L(-d)`` per cell from whole forwards, the difference taken in Python ints (no int64)."""
    flat, out = tensor.reshape(-1), []
    for i in range(flat.size):
        save = int(flat[i])
        flat[i] = save + delta
        lp = core_lora.forward(m).loss
        flat[i] = save - delta
        lm = core_lora.forward(m).loss
        flat[i] = save
        out.append(lp - lm)
    return out


@pytest.mark.parametrize("proven", [True, False])
def test_near_the_int64_bound_the_fast_path_matches_python_integers(proven, monkeypatch):
    """x scaled up until the loss is 0.6 x 2^62: both tensors' coarse bounds fail, so every cell goes through
    the tight L(+-delta) check, which needs the unmoved outputs (the seed's naive path refuses here)."""
    base = core_lora.init_model(2, 3, 2)
    m = core_lora.Model(base.x * 3500, base.W, base.A, base.B)
    f = core_lora.forward(m)
    peak = q20.max_abs(f.y) ** 2
    assert f.loss + peak * 2 >= q20.LIMIT  # B's coarse bound (T terms) fails, and A's (T x DM) too
    if not proven:
        monkeypatch.setattr(fast, "proven_a", lambda *args: False)
    plain = RunContext(params={})
    assert fast.diffs_fast_a(m, f, 2097, plain).reshape(-1).tolist() == _python_int_diffs(m, m.A, 2097)
    assert fast.diffs_fast_b(m, f, 2097, plain).reshape(-1).tolist() == _python_int_diffs(m, m.B, 2097)


def test_loss_between_2_62_and_2_63_is_exact_and_beyond_is_refused():
    from nxgates.core import q20

    y = np.array([2 << 30, 1 << 30, 1 << 30], dtype=np.int64)  # sum of squares = 6 * 2^60, above 2^62
    assert int(q20.sum_squares(y)) == sum(int(v) ** 2 for v in y) == 6 << 60
    with pytest.raises(q20.Q20Overflow, match="2\\^63"):
        q20.sum_squares(np.array([2 << 30, 2 << 30], dtype=np.int64))  # exactly 2^63: numpy would wrap
    base = np.array([[[1 << 30]]], dtype=np.int64)
    moved = base + (1 << 28)  # moves L by (2^30 + 2^28)^2 - 2^60 = 0.5625 * 2^60
    assert int(fast._loss_delta(7 << 60, base, moved, base, (2,))[0, 0]) == (int(moved[0, 0, 0]) ** 2 - (1 << 60))
    with pytest.raises(q20.Q20Overflow, match="L\\(\\+-delta\\)"):
        fast._loss_delta(15 << 59, base, moved, base, (2,))  # L(+d) = 8.0625 * 2^60 >= 2^63


def test_the_a_priori_proof_fails_when_l_plus_delta_could_reach_2_63():
    m = core_lora.init_model(3, 7, 2)
    f = core_lora.forward(m)
    from nxgates.core import q20
    dhs = [np.ones((1, 2, 3), dtype=np.int64)] * 2
    sum_abs_y = int(np.abs(f.y).sum())
    assert fast.proven_a(m, f, dhs, sum_abs_y) is True
    f.loss = q20.SQUARES_LIMIT - 1
    assert fast.proven_a(m, f, dhs, sum_abs_y) is False
