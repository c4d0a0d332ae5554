"""The header of an ``.npy`` file, parsed by nxgates rather than by numpy: every field checked, and a hostile
header one line (a :class:`ConfigError`, exit 2), never numpy's warning or a RecursionError. Used for the
user's tensors and for another implementation's gradients alike."""

from __future__ import annotations

import ast
import math
import struct
from typing import BinaryIO

import numpy as np

from nxgates.errors import ConfigError

HEADER_LIMIT = 10000  #: bytes of an ``.npy`` header read at most (numpy's own limit)
#: each ``.npy`` format version's header-length field and header encoding
HEADER_FORMATS = {(1, 0): ("<H", "latin1"), (2, 0): ("<I", "latin1"), (3, 0): ("<I", "utf8")}
MAX_RANK = 64  #: numpy's most dimensions
INDEX_LIMIT = np.iinfo(np.intp).max  #: an array's bytes (and each length) must be indexable


def parse_npy_header(fh: BinaryIO, version: tuple[int, int], where: str, corrupt: str,
                     limit: int = HEADER_LIMIT) -> tuple[np.dtype, tuple[int, ...], bool]:
    """The dtype, shape and order an ``.npy`` header declares, read after the magic string: a Python dict
    literal of exactly ``descr``, ``fortran_order`` and ``shape``, every value checked (a negative, boolean or
    absurd length, a non-boolean order or an unknown dtype is refused, with the header's own words cut
    short). Parsed here rather than by numpy, whose fallback for Python 2 headers prints a warning and whose
    parser lets a RecursionError through. ``corrupt`` starts the message of a header that cannot be parsed."""
    size_format, encoding = HEADER_FORMATS[version]
    (length,) = struct.unpack(size_format, _exactly(fh, struct.calcsize(size_format), where, corrupt))
    if length > limit:
        raise ConfigError(f"{where}: {corrupt} (a header of {length} bytes; at most {limit} are read)")
    raw = _exactly(fh, length, where, corrupt)
    try:
        text = raw.decode(encoding)
        d = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):  # the parser's limits included
        shown = cut(raw.decode(encoding, "replace").strip())
        raise ConfigError(f"{where}: {corrupt} (its header is not a Python literal: {shown})") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise ConfigError(f"{where}: {corrupt} (its header is not a dict of descr, fortran_order and shape: "
                          f"{cut(text.strip())})")
    shape, fortran = d["shape"], d["fortran_order"]
    if not isinstance(shape, tuple) or not all(type(n) is int for n in shape):
        raise ConfigError(f"{where}: bad .npy header: shape {cut(repr(shape))} is not a tuple of integers")
    if any(n < 0 for n in shape):
        raise ConfigError(f"{where}: bad .npy header: shape {cut(repr(shape))} has a negative length")
    if type(fortran) is not bool:
        raise ConfigError(f"{where}: bad .npy header: fortran_order {cut(repr(fortran))} is not True or False")
    try:
        dtype = np.lib.format.descr_to_dtype(d["descr"])
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, SyntaxError, RecursionError):
        raise ConfigError(f"{where}: bad .npy header: descr {cut(repr(d['descr']))} is not a dtype") from None
    if len(shape) > MAX_RANK or math.prod(max(n, 1) for n in shape) * max(dtype.itemsize, 1) > INDEX_LIMIT:
        raise ConfigError(f"{where}: bad .npy header: shape {cut(repr(shape))} is beyond any array")
    return dtype, shape, fortran


def _exactly(fh: BinaryIO, n: int, where: str, corrupt: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise ConfigError(f"{where}: {corrupt} (it ends inside its header)")
    return data


def cut(text: str, limit: int = 80) -> str:
    """A hostile file's own words, cut short enough for a one-line message."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
