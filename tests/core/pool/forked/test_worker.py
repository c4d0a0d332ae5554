"""The parent's handle on a forked worker: frames written only as far as the pipe takes them, answers cut out
of the pipe whole, the stop frame queued once and only to a worker that runs."""

import contextlib
import os
import struct
import threading

import pytest

from nxgates.core.pool.forked.worker import ForkedWorker


def frames(*payloads: bytes) -> bytes:
    return b"".join(struct.pack("<Q", len(p)) + p for p in payloads)


@pytest.fixture
def answer_pipe():
    """A worker as the parent sees it, whose answer pipe the test writes."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    worker = ForkedWorker(0)
    worker.answer_fd = read_end
    yield worker, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_answers_are_cut_out_of_the_pipe_whole_whatever_the_pieces(answer_pipe):
    worker, write_end = answer_pipe
    data = frames(b"first", b"", b"third" * 20)
    os.write(write_end, data[:3])
    assert worker.receive() == []  # not even a length yet
    os.write(write_end, data[3:21])  # the first two frames (13 and 8 bytes)
    assert worker.receive() == [b"first", b""]
    os.write(write_end, data[21:])
    assert worker.receive() == [b"third" * 20] and worker.received == bytearray()
    assert worker.receive() == [] and not worker.answers_ended


def test_an_answer_longer_than_one_read_is_read_whole(answer_pipe):
    worker, write_end = answer_pipe
    long = bytes(range(256)) * 1000
    data = frames(long)
    got = []
    threading.Thread(target=lambda: (os.write(write_end, data), os.close(write_end))).start()
    while not worker.answers_ended:
        got += worker.receive(until_end=True)
    assert got == [long]


def test_the_end_of_the_answer_pipe_is_noticed(answer_pipe):
    worker, write_end = answer_pipe
    os.write(write_end, frames(b"last") + b"\x09")
    os.close(write_end)
    assert worker.receive(until_end=True) == [b"last"]
    assert worker.answers_ended and worker.received == bytearray(b"\x09")


def test_the_parent_writes_what_a_pipe_takes_and_never_blocks():
    """A batch longer than the pipe holds: what does not fit now waits for the next chance, in order."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    worker = ForkedWorker(0)
    worker.task_fd = write_end
    try:
        payload = os.urandom(200_000)
        worker.send(payload)  # returns at once: the pipe holds 64 KiB
        assert worker.unsent
        worker.send(b"second")
        received = b""
        while worker.unsent:
            received += os.read(read_end, 1 << 20)
            worker.send_some()
        received += os.read(read_end, 1 << 20)
        assert received == frames(payload, b"second")
    finally:
        os.close(read_end)
        os.close(write_end)


def test_writing_to_a_worker_that_is_gone_drops_what_was_unsent():
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.close(read_end)
    worker = ForkedWorker(0)
    worker.task_fd = write_end
    try:
        worker.send(b"batch")  # EPIPE: no exception, nothing left to write; the sentinel says why
        assert not worker.unsent
    finally:
        os.close(write_end)


def test_the_stop_frame_is_queued_once_and_only_for_a_worker_that_runs():
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    worker = ForkedWorker(0)
    worker.ask_to_stop()
    assert not worker.stopping and not worker.unsent  # never forked: nothing to stop
    worker.process, worker.task_fd = object(), write_end
    try:
        worker.ask_to_stop()
        worker.ask_to_stop()
        assert worker.stopping and os.read(read_end, 100) == struct.pack("<Q", 0)
    finally:
        os.close(read_end)
        os.close(write_end)
