"""Chunk sizes of a streamed batch: about a fixed number of bytes of gradient rows, in whole rounds of the
workers, never more than the batch."""

from nxgates.core.chunks import CHUNK_BYTES, REMOTE_CHUNK_BYTES, chunk_examples


def test_the_byte_budgets_are_32_mib_locally_and_256_mib_on_a_cluster():
    assert CHUNK_BYTES == 32 * 1024 * 1024
    assert REMOTE_CHUNK_BYTES == 256 * 1024 * 1024


def test_a_chunk_holds_the_budget_of_float32_rows_in_whole_rounds_of_workers():
    # 32 MiB // (4 * 1000) = 8388 rows; 8388 % 5 == 3, so 8385 = 1677 rounds of 5
    assert chunk_examples(1000, 5, 10**6) == 8385
    assert chunk_examples(1000, 5, 10**6, remote=False) == 8385
    # 256 MiB // 4000 = 67108 rows; 67108 % 5 == 3
    assert chunk_examples(1000, 5, 10**6, remote=True) == 67105


def test_the_result_is_an_int():
    assert type(chunk_examples(1000, 5, 10**6)) is int
    assert type(chunk_examples(3, 2, 7)) is int


def test_a_chunk_never_holds_more_than_the_batch():
    assert chunk_examples(1000, 5, 100) == 100
    assert chunk_examples(1000, 5, 8385) == 8385
    assert chunk_examples(1000, 5, 8386) == 8385


def test_a_chunk_holds_at_least_one_example_per_worker():
    """Rows wider than the budget still give each worker one example a chunk."""
    assert chunk_examples(10**7, 4, 100) == 4  # 32 MiB // 40 MB == 0 rows
    assert chunk_examples(3 << 20, 4, 100) == 4  # 2 rows, fewer than the workers
    assert chunk_examples(10**7, 4, 3) == 3  # and still no more than the batch


def test_rows_already_in_whole_rounds_are_kept():
    # 32 MiB // (4 * 1024) = 8192 rows, 8192 = 2048 rounds of 4
    assert chunk_examples(1024, 4, 10**6) == 8192
    assert chunk_examples(1024, 3, 10**6) == 8190
