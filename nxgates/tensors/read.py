"""Reading a gate's input tensors: an ``.npz`` as ``nxgates export`` writes it, or a directory of raw
little-endian ``NAME.bin`` dumps. Everything is checked before it is trusted, and sizes before anything is
read: a bad input is one line naming the array (a :class:`ConfigError`, exit 2), never a traceback.

Big-endian and Fortran-ordered arrays are converted to native C order (losslessly: the same values).
Object arrays are refused from their header: nothing is ever unpickled.
"""

from __future__ import annotations

import json
import lzma
import math
import os
import zipfile
import zlib
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from nxgates.core.memory import require
from nxgates.core.npy import parse_npy_header
from nxgates.errors import ConfigError
from nxgates.gatekit import INPUT_DTYPES, InputArray, InputSpec, ParamValue
from nxgates.safeio import regular_file

#: the dtype kinds :func:`read_any_npz` accepts: bools, integers, floats and complex numbers
ANY_ARRAY_KINDS = "biufc"

#: the member holding the format version, the gate and its parameters (a 0-d unicode array of JSON)
META = "nxgates"
FORMAT_VERSION = 1
#: a raw dump's element type: little-endian, as a C program on x86 or ARM writes its buffer
RAW_DTYPES = {"q20": np.dtype("<i8"), "float32": np.dtype("<f4")}
META_LIMIT = 1 << 20  #: bytes of metadata read at most
NPZ_VERSIONS = ((1, 0), (2, 0))  #: what ``np.savez`` writes, and so what an ``.npz`` member may be
NOT_NPY = "corrupt member, or not an .npy one"  #: how a member that is no ``.npy`` is refused
#: the zip compression methods zipfile decompresses
COMPRESSIONS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
                zipfile.ZIP_LZMA: "lzma"}
#: what reading a corrupt member raises: zipfile's own errors and its decompressors'
#: (NotImplementedError and RuntimeError: a feature zipfile lacks, e.g. patched data, strong encryption)
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, OSError, ValueError, EOFError, NotImplementedError,
              RuntimeError)


class Header(NamedTuple):
    """What an ``.npy`` member declares, read before its data."""

    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    nbytes: int


def read_npz(path: str, spec: InputSpec, flag: str = "--inputs") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The spec's arrays from an ``.npz`` (dtype and rank checked, converted to native C order), and its
    metadata (empty when the archive has none). ``flag``: the option that named the file, for messages."""
    where = f"{flag} {path}"
    with _open_npz(path, flag) as zf:
        members = _members(zf, where)
        _names_match(where, spec, set(members) - {META}, "array {} (member {}.npy)")
        declared = {a.name: a for a in spec.arrays}
        headers = {name: _header(zf, info, f"{where}: array {name}") for name, info in members.items()}
        for name, h in headers.items():
            if name == META:
                if h.dtype.kind != "U" or h.shape != () or h.nbytes > META_LIMIT:
                    raise ConfigError(f"{where}: member {META}.npy is not nxgates' metadata")
            else:
                _check_declared(f"{where}: array {name}", declared[name], h.dtype, len(h.shape))
        require(2 * sum(h.nbytes for h in headers.values()), f"{where}: its arrays")  # read, then converted
        arrays = {name: _read_member(zf, members[name], headers[name], f"{where}: array {name}")
                  for name in headers}
    meta = _meta(where, arrays.pop(META)) if META in arrays else {}
    return {a.name: arrays[a.name] for a in spec.arrays}, meta


def read_any_npz(path: str, flag: str = "--inputs") -> dict[str, np.ndarray]:
    """Every array of an ``.npz``, whatever its names, numeric or bool dtype and shape (converted to native C
    order), read with the checks of :mod:`nxgates.tensors.read`: sizes before data, no pickles. The
    metadata member ``nxgates export`` writes is left out. For a gate that takes any arrays (invariance)."""
    where = f"{flag} {path}"
    with _open_npz(path, flag) as zf:
        members = {name: info for name, info in _members(zf, where).items() if name != META}
        if not members:
            raise ConfigError(f"{where}: holds no arrays")
        headers = {name: _header(zf, info, f"{where}: array {name}") for name, info in members.items()}
        for name, h in headers.items():
            if h.dtype.kind not in ANY_ARRAY_KINDS or h.dtype.fields is not None:
                raise ConfigError(f"{where}: array {name}: dtype {h.dtype} (numbers or bools only)")
        require(2 * sum(h.nbytes for h in headers.values()), f"{where}: its arrays")  # read, then converted
        return {name: _read_member(zf, members[name], headers[name], f"{where}: array {name}")
                for name in sorted(members)}


def _open_npz(path: str, flag: str) -> zipfile.ZipFile:
    """The archive at ``path`` (a regular file), or one line saying why it cannot be read as one."""
    where = f"{flag} {path}"
    regular_file(path, flag)
    try:
        return zipfile.ZipFile(path)
    except ZIP_ERRORS as exc:
        if _starts_with(path, b"\x93NUMPY"):
            raise ConfigError(f"{where}: an .npy array, not an .npz archive (one NAME.npy member per array, as "
                              f"nxgates export writes)") from None
        raise ConfigError(f"{where}: not a readable .npz archive ({exc})") from None


def _members(zf: zipfile.ZipFile, where: str) -> dict[str, zipfile.ZipInfo]:
    """The archive's members by array name: each a ``NAME.npy``, each name once."""
    members: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        name = info.filename
        if not name.endswith(".npy") or name[:-4] in members:
            raise ConfigError(f"{where}: unexpected member {name!r} (an .npz holds one NAME.npy per array)")
        members[name[:-4]] = info
    return members


def _starts_with(path: str, magic: bytes) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(magic)) == magic
    except OSError:
        return False


def read_raw_dir(path: str, spec: InputSpec, params: dict[str, ParamValue], flag: str = "--inputs"
                 ) -> dict[str, np.ndarray]:
    """The spec's arrays from ``path/NAME.bin`` raw little-endian dumps, in the shapes the parameters give."""
    where = f"{flag} {path}"
    try:
        found = {f[:-4] for f in os.listdir(path) if f.endswith(".bin")}
    except OSError as exc:
        raise ConfigError(f"{where}: cannot list the directory: {exc.strerror or exc}") from None
    _names_match(where, spec, found, "array {} ({}.bin)")
    shapes = {a.name: a.shape(params) for a in spec.arrays}
    sizes = {a.name: math.prod(shapes[a.name]) * RAW_DTYPES[a.dtype].itemsize for a in spec.arrays}
    require(2 * sum(sizes.values()), f"{where}: its arrays")
    arrays = {}
    for a in spec.arrays:
        file = os.path.join(path, f"{a.name}.bin")
        regular_file(file, f"{where}: array {a.name}:")
        have = os.stat(file).st_size
        if have != sizes[a.name]:
            raise ConfigError(f"{where}: array {a.name}: {a.name}.bin has {have} bytes, expected {sizes[a.name]} "
                              f"({INPUT_DTYPES[a.dtype]} of shape {_shape_text(a, shapes[a.name])})")
        try:
            raw = np.fromfile(file, RAW_DTYPES[a.dtype])
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{where}: array {a.name}: cannot read {a.name}.bin: {exc}") from None
        if raw.size * raw.itemsize != sizes[a.name]:
            raise ConfigError(f"{where}: array {a.name}: {a.name}.bin changed while it was read")
        arrays[a.name] = np.ascontiguousarray(raw.reshape(shapes[a.name]), raw.dtype.newbyteorder("="))
    return arrays


def sizes_of(where: str, spec: InputSpec, arrays: dict[str, np.ndarray]) -> dict[str, tuple[int, str]]:
    """The parameters the arrays' shapes give: name -> (value, the first array that gave it). Arrays that
    disagree on a size, or a fixed axis of the wrong length, are refused."""
    sizes: dict[str, tuple[int, str]] = {}
    for a in spec.arrays:
        shape = arrays[a.name].shape
        for k, (axis, n) in enumerate(zip(a.axes, shape, strict=True)):
            if n == 0:
                raise ConfigError(f"{where}: array {a.name}: empty (shape {shape})")
            if isinstance(axis, int):
                if n != axis:
                    raise ConfigError(f"{where}: array {a.name}: axis {k} has length {n}, expected {axis}")
            elif axis in sizes and sizes[axis][0] != n:
                value, first = sizes[axis]
                raise ConfigError(f"{where}: array {a.name}: shape {shape} gives {axis}={n}, but array {first} "
                                  f"gives {axis}={value}")
            else:
                sizes.setdefault(axis, (n, a.name))
    return sizes


def check_finite(where: str, spec: InputSpec, arrays: dict[str, np.ndarray]) -> None:
    """float32 inputs hold numbers: NaN or Inf is refused, naming the first such cell."""
    for a in spec.arrays:
        arr = arrays[a.name]
        if a.dtype == "float32":
            bad = ~np.isfinite(arr)
            if bad.any():
                first = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ConfigError(f"{where}: array {a.name}: {int(bad.sum())} value(s) are NaN or Inf "
                                  f"(first at {first}: {arr[first]})")


def _names_match(where: str, spec: InputSpec, found: set[str], form: str) -> None:
    expected = [a.name for a in spec.arrays]
    missing = [n for n in expected if n not in found]
    if missing:
        raise ConfigError(f"{where}: missing {form.format(missing[0], missing[0])}; the gate's arrays are "
                          f"{', '.join(expected)}")
    unexpected = sorted(found - set(expected))
    if unexpected:
        raise ConfigError(f"{where}: unexpected {form.format(unexpected[0], unexpected[0])}; the gate's arrays "
                          f"are {', '.join(expected)}")


def _check_declared(where: str, declared: InputArray, dtype: np.dtype, rank: int) -> None:
    """The element type (either byte order) and the rank the gate declares."""
    want = np.dtype(INPUT_DTYPES[declared.dtype])
    if dtype.newbyteorder("=") != want.newbyteorder("=") or dtype.fields is not None:
        what = "Q20 int64" if declared.dtype == "q20" else str(want)
        raise ConfigError(f"{where}: dtype {dtype}, expected {what}")
    if rank != len(declared.axes):
        raise ConfigError(f"{where}: rank {rank}, expected {len(declared.axes)} "
                          f"({' x '.join(map(str, declared.axes))})")


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> Header:
    """A member's ``.npy`` header, and its declared size checked against the member's (before reading)."""
    _check_member(info, where)
    try:
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version not in NPZ_VERSIONS:
                raise ConfigError(f"{where}: .npy format version {version} is not supported (1.0 or 2.0)")
            dtype, shape, fortran = parse_npy_header(fh, version, where, NOT_NPY)
            offset = fh.tell()
    except ConfigError:
        raise
    except ZIP_ERRORS as exc:
        raise ConfigError(f"{where}: {NOT_NPY} ({exc})") from None
    if dtype.hasobject:
        raise ConfigError(f"{where}: an object array (refused: nothing is unpickled)")
    nbytes = math.prod(shape) * dtype.itemsize
    if info.file_size != offset + nbytes:
        raise ConfigError(f"{where}: truncated or corrupt: the header declares {dtype} of shape {shape} "
                          f"({nbytes} bytes), the member holds {info.file_size - offset}")
    return Header(dtype, shape, fortran, nbytes)


def _check_member(info: zipfile.ZipInfo, where: str) -> None:
    """Refuse, from the zip directory, a member zipfile cannot or must not open: encrypted, or compressed
    by a method it does not know."""
    if info.flag_bits & 0x1:
        raise ConfigError(f"{where}: an encrypted member (password-protected archives are not read)")
    if info.compress_type not in COMPRESSIONS:
        raise ConfigError(f"{where}: compression method {info.compress_type} is not supported "
                          f"({', '.join(COMPRESSIONS.values())})")


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, h: Header, where: str) -> np.ndarray:
    """A member's data, into an array of its declared size, then native byte order and C order. The data
    ends the member (:func:`_header` checked the sizes), and zipfile checks the member's CRC as the last byte
    is read."""
    flat = np.empty(math.prod(h.shape), h.dtype)
    try:
        with zf.open(info) as fh:
            np.lib.format.read_magic(fh)
            fh.seek(info.file_size - h.nbytes)
            _read_into(fh, memoryview(flat).cast("B"), where)
    except ConfigError:
        raise
    except ZIP_ERRORS as exc:
        raise ConfigError(f"{where}: corrupt member ({exc})") from None
    shaped = flat.reshape(h.shape[::-1]).T if h.fortran else flat.reshape(h.shape)
    return shaped.astype(h.dtype.newbyteorder("="), order="C", copy=False)


def _read_into(fh: BinaryIO, view: memoryview, where: str) -> None:
    done = 0
    while done < len(view):
        n = fh.readinto(view[done:])
        if not n:
            raise ConfigError(f"{where}: truncated: {done} of {len(view)} bytes")
        done += n


def _meta(where: str, arr: np.ndarray) -> dict[str, Any]:
    try:
        meta = json.loads(str(arr[()]))
    except (ValueError, RecursionError):  # RecursionError: JSON nested beyond the parser's depth
        meta = None
    if not isinstance(meta, dict) or type(meta.get("format")) is not int:
        raise ConfigError(f"{where}: member {META}.npy is not nxgates' metadata")
    if meta["format"] > FORMAT_VERSION:
        raise ConfigError(f"{where}: format {meta['format']} is newer than this nxgates reads ({FORMAT_VERSION})")
    return meta


def _shape_text(a: InputArray, shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(f"{axis}={n}" if isinstance(axis, str) else str(n)
                           for axis, n in zip(a.axes, shape, strict=True)) + ")"


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the arrays by name: each name, dtype, shape and little-endian C-order bytes. Two runs on
    the same tensors share a digest whatever file format carried them."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()

