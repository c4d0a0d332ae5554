"""The fast gradcheck's pieces: its blocks, the distinct moves it shares between cells, and the same integers
as the seed's whole forwards whatever the blocks, the columns asked for or the path (proven or guarded)."""

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.core.lora import fast, gradcheck
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
    monkeypatch.setattr(fast, "_proven_a", lambda *args: False)
    monkeypatch.setattr(fast, "_proven_b", lambda *args: False)
    m, f = _model(5, 7, 3)
    ticks = []
    out = np.zeros((7, 3), np.int64)
    fast.cells_a(m, f, 1000, range(3), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert sum(ticks) == 21
    assert fast.diffs_fast_b(m, f, 1000, RunContext(params={})).reshape(-1).tolist() == want_b.tolist()


def test_the_guarded_path_with_a_rank_above_the_rows(monkeypatch):
    want_a, _ = _naive(2, 5, 4, 777)
    monkeypatch.setattr(fast, "_proven_a", lambda *args: False)
    m, f = _model(2, 5, 4)
    out = np.zeros((5, 4), np.int64)
    fast.cells_a(m, f, 777, range(4), out, lambda n: None)
    assert out.reshape(-1).tolist() == want_a.tolist()


def test_the_guarded_path_in_small_chunks_gives_the_same_integers(monkeypatch):
    want_a, _ = _naive(5, 7, 3, 1000)
    monkeypatch.setattr(fast, "_proven_a", lambda *args: False)
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
    monkeypatch.setattr(fast, "_proven_a", lambda *args: False)
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
            monkeypatch.setattr(fast, "_proven_a", lambda *args: False)
            monkeypatch.setattr(fast, "_proven_b", lambda *args: False)
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
    assert fast._proven_b(f, 2097)
    shift, values, _, _ = fast.x_shifts(m, 2097)
    moves = q20.tdiv(f.acc_h.T[:, :, None] + values[None], q20.S) - f.h.T[:, :, None]
    assert fast._proven_a(m, f, [moves], fast._sum_abs(f.y))


def test_the_proofs_fail_for_moves_near_the_limit():
    m, f = _model(3, 6, 2)
    assert not fast._proven_b(f, 1 << 40)
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
