"""The memory a lora run needs, estimated before it starts, so a size too large refuses (exit 2) at once."""

from __future__ import annotations

import nxgates.core.lora.fast as fast
from nxgates.core.memory import require


def require_memory(T: int, DM: int, R: int, workers: int) -> None:
    """Refuse (ResourceError) unless the tensors, the forward and backward, and each of ``workers``
    gradcheck workers' temporaries fit the memory available."""
    tensors = T * DM + DM * DM + 2 * DM * R  # x, W, A, B
    work = 12 * T * DM + 4 * T * R + workers * chunk_elements(T, DM, R)  # forward/backward, each worker's chunks
    require(8 * (3 * tensors + work), f"lora at T={T} DM={DM} R={R}")


def chunk_elements(T: int, DM: int, R: int) -> int:
    """int64 elements a gradcheck worker's temporaries hold at once: ``x * delta`` and the sort that finds its
    distinct values (a few ``(T, 2 DM)`` arrays); a block of columns' distinct moves of h, or the guarded
    path's per-cell moves, and the arrays that make them (about four of at most :data:`.fast.MOVES_ELEMENTS`); and
    the guarded path's ``(rows, R, T, DM)`` blocks (about four alive; the proven path's blocks are smaller,
    :data:`.fast.MOVED_ELEMENTS`). The chunk sizes cap them at large sizes (64 MiB); small models need only what
    their sizes give, so a tight memory limit does not refuse the seed's size."""
    block = R * T * DM  # one row of A's guarded block
    rows = min(DM, max(1, fast.CHECKED_ELEMENTS // max(1, block)))
    return 11 * DM * T + 4 * min(fast.MOVES_ELEMENTS, 2 * R * T * DM) + 4 * rows * block
