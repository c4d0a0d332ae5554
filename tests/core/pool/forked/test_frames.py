"""The messages between the parent and a forked worker: a length and a pickle, cut out whole however they
arrive, read whole from a blocking pipe, written whole however many writes it takes."""

import os
import threading

from nxgates.core.pool.forked.frames import STOP_FRAME, cut_frames, frame, read_frame, write_all


def test_a_frame_is_its_length_then_its_payload_and_the_stop_frame_is_an_empty_one():
    assert frame(b"abc") == b"\x03\x00\x00\x00\x00\x00\x00\x00abc"
    assert frame(b"") == STOP_FRAME == b"\x00" * 8


def test_whole_frames_are_cut_out_and_a_partial_one_stays():
    received = bytearray(frame(b"first") + frame(b"") + frame(b"third")[:6])
    assert cut_frames(received) == [b"first", b""]
    assert received == bytearray(frame(b"third")[:6])
    received += frame(b"third")[6:]
    assert cut_frames(received) == [b"third"] and received == bytearray()
    assert cut_frames(received) == []


def test_a_frame_is_read_whole_and_the_stop_frame_or_end_of_file_reads_as_none():
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, frame(b"batch") + STOP_FRAME + frame(b"after"))
        assert read_frame(read_end) == b"batch"
        assert read_frame(read_end) is None  # the stop frame
        assert read_frame(read_end) == b"after"
        os.write(write_end, frame(b"cut short")[:10])
        os.close(write_end)
        assert read_frame(read_end) is None  # end of file inside a frame
    finally:
        os.close(read_end)


def test_data_longer_than_a_pipe_is_written_whole():
    read_end, write_end = os.pipe()
    data = os.urandom(3 << 16)
    got = bytearray()

    def reader():
        while chunk := os.read(read_end, 1 << 16):
            got.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()
    write_all(write_end, data)
    os.close(write_end)
    t.join(10)
    os.close(read_end)
    assert bytes(got) == data
