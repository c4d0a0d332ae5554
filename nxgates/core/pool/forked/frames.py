"""The messages between the parent and a forked worker: a frame is an 8-byte length and a pickle.

The parent sends a worker's queued tasks as one batch, ``[(fn, ctx), ...]``; a length of 0 asks the worker to
stop. The worker answers each batch with one frame: ``(error text or None, value)`` per task, or one error
text for the whole batch.
"""

from __future__ import annotations

import os
import struct
from typing import Any

#: a frame's header: the length of the pickle that follows; a length of 0 asks the worker to stop
LENGTH = struct.Struct("<Q")
STOP_FRAME = LENGTH.pack(0)
#: how much the parent reads from an answer pipe at a time (a pipe holds 64 KiB unless enlarged)
READ_BYTES = 1 << 16

#: a worker's answer to a batch: (error text or None, value) per task, or one error text for the whole batch
Answer = list[tuple[str | None, Any]] | str


def frame(payload: bytes) -> bytes:
    """``payload`` with its length in front."""
    return LENGTH.pack(len(payload)) + payload


def cut_frames(received: bytearray) -> list[bytes]:
    """The complete frames' payloads at the head of ``received``, oldest first, cut out of it; a frame not
    yet whole stays."""
    payloads, start = [], 0
    while len(received) - start >= LENGTH.size:
        (length,) = LENGTH.unpack_from(received, start)
        end = start + LENGTH.size + length
        if end > len(received):
            break
        payloads.append(bytes(received[start + LENGTH.size:end]))
        start = end
    del received[:start]
    return payloads


def read_frame(fd: int) -> bytes | None:
    """The next frame's pickle from a blocking ``fd``; None for the stop frame or end of file."""
    header = read_exactly(fd, LENGTH.size)
    if header is None:
        return None
    (length,) = LENGTH.unpack(header)
    return read_exactly(fd, length) if length else None


def read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``, or None if it reaches end of file first."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to a blocking ``fd``, however many writes it takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
