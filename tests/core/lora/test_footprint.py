"""The memory a lora run asks for before it starts: the exact estimate, and the refusal it leads to."""

import pytest

from nxgates.core import memory
from nxgates.core.lora import fast, footprint
from nxgates.errors import ResourceError


def _asked(monkeypatch, *args):
    """What ``require_memory(*args)`` asks the memory budget for: (bytes, what)."""
    calls = []
    monkeypatch.setattr(footprint, "require", lambda nbytes, what: calls.append((nbytes, what)))
    footprint.require_memory(*args)
    assert len(calls) == 1
    return calls[0]


def test_the_seed_size_chunk_is_what_its_sizes_give():
    # block = 2*4*6 = 48, every row of A fits one guarded block: 11*6*4 + 4*(2*2*4*6) + 4*6*48
    assert footprint.chunk_elements(4, 6, 2) == 264 + 384 + 1152


def test_a_guarded_block_holds_as_many_rows_as_fit_the_checked_elements():
    # block = 2*256*256 = 2^17: 2^21 // 2^17 = 16 rows of DM = 256
    n = footprint.chunk_elements(256, 256, 2)
    assert n == 11 * 256 * 256 + 4 * (2 * 2 * 256 * 256) + 4 * 16 * (1 << 17)
    assert type(n) is int


def test_a_guarded_block_holds_every_row_when_they_fit():
    # block = 1*8*64 = 512: 2^21 // 512 = 4096 rows, but A has 64
    assert footprint.chunk_elements(8, 64, 1) == 11 * 64 * 8 + 4 * (2 * 512) + 4 * 64 * 512


def test_a_block_larger_than_the_checked_elements_still_holds_one_row():
    # block = 8*1024*1024 = 2^23 > 2^21; the moves cap at MOVES_ELEMENTS (2*8*2^20 > 2^20)
    assert footprint.chunk_elements(1024, 1024, 8) == 11 * (1 << 20) + 4 * fast.MOVES_ELEMENTS + 4 * (1 << 23)


def test_the_moves_cap_applies_from_exactly_moves_elements():
    # 2*R*T*DM = 2^20 exactly: the cap and the size agree; one more row of T is above the cap
    assert footprint.chunk_elements(512, 1024, 1) == 11 * (1 << 19) + 4 * (1 << 20) + 4 * 4 * (1 << 19)
    assert footprint.chunk_elements(513, 1024, 1) == 11 * 513 * 1024 + 4 * (1 << 20) + 4 * 3 * 513 * 1024


def test_require_memory_asks_for_tensors_work_and_every_workers_chunks(monkeypatch):
    T, DM, R, workers = 5, 7, 3, 4
    tensors = T * DM + DM * DM + 2 * DM * R
    work = 12 * T * DM + 4 * T * R + workers * footprint.chunk_elements(T, DM, R)
    assert _asked(monkeypatch, T, DM, R, workers) == (8 * (3 * tensors + work), "lora at T=5 DM=7 R=3")
    assert _asked(monkeypatch, 5, 7, 3, 4)[0] == 8 * (3 * (35 + 49 + 42) + (420 + 60 + 4 * 4165))
    assert footprint.chunk_elements(5, 7, 3) == 385 + 840 + 2940


def test_more_workers_ask_for_more_memory(monkeypatch):
    one = _asked(monkeypatch, 4, 6, 2, 1)[0]
    three = _asked(monkeypatch, 4, 6, 2, 3)[0]
    assert three - one == 8 * 2 * footprint.chunk_elements(4, 6, 2)


def test_a_size_beyond_the_budget_refuses_naming_the_sizes(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * 10_000)
    with pytest.raises(ResourceError, match=r"^lora at T=64 DM=64 R=4 needs about .* but the memory budget is"):
        footprint.require_memory(64, 64, 4, 1)


def test_a_size_within_the_budget_passes(monkeypatch):
    nbytes = _asked(monkeypatch, 4, 6, 2, 1)[0]
    monkeypatch.undo()
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * nbytes)
    footprint.require_memory(4, 6, 2, 1)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * nbytes - 2)
    with pytest.raises(ResourceError):
        footprint.require_memory(4, 6, 2, 1)
