"""How many examples a chunk of a streamed batch holds: memory stays flat in B."""

from __future__ import annotations

#: the gradient rows of one chunk are sized to about this many bytes: memory is flat in B, and a chunk still
#: holds a few examples per worker (tests make it tiny to force many chunks)
CHUNK_BYTES = 32 << 20
#: the same on a Dask cluster, where each chunk's pass is a round trip through the scheduler (measured about
#: 11 ms at large, against 0.4 ms to a forked worker): bigger chunks keep that a small part of the pass
REMOTE_CHUNK_BYTES = 256 << 20


def chunk_examples(n_params: int, n_workers: int, B: int, remote: bool = False) -> int:
    """Examples per chunk: about :data:`CHUNK_BYTES` (:data:`REMOTE_CHUNK_BYTES` on a cluster) of gradient
    rows, in whole rounds of the workers.

    Whole rounds keep an example's parallel run and its re-run on the same worker (tasks are dealt
    round-robin), as when the batch was one chunk; a movable task may still run on another.
    """
    rows = (REMOTE_CHUNK_BYTES if remote else CHUNK_BYTES) // (4 * n_params)
    return min(B, max(n_workers, rows - rows % n_workers))
