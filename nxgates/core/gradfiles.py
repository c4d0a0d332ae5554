"""Per-example gradient files: ``--save-grads`` writes a float32 (B, NP) ``.npy`` chunk by chunk,
``--compare-grads`` reads one back (or another implementation's raw little-endian float32 ``.bin`` dump of
the same shape) a chunk at a time, so neither holds B rows in memory."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from nxgates.core.tape import F32
from nxgates.errors import ConfigError
from nxgates.safeio import PendingOutput, commit_output, discard_output, open_output, regular_file

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  #: what numpy takes for an .npz: a member, or an empty archive
HEADER_LIMIT = 1 << 16  #: bytes of an ``.npy`` header read at most (a wide structured dtype's is long)


class GradReader:
    """``--compare-grads``: a saved float32 (B, NP) ``.npy`` or raw ``.bin``, validated as a memory map and read
    a chunk at a time into a reused buffer (file reads, so its pages never pile up in this process).

    ``report`` (where the caller gave the tensors' layout) gathers where the rows part from ours, cell by cell
    (:class:`nxgates.core.ulp.UlpReport`)."""

    def __init__(self, path: str, arr: np.ndarray, report: Any = None):
        self.path = path
        self.arr = arr
        self.report = report
        self.fh = open(path, "rb") if arr.flags.c_contiguous else None  # noqa: SIM115 (closed by close())
        self.swapped = arr.dtype != np.dtype(F32)  #: the other byte order: swapped after reading, bits kept

    @classmethod
    def open(cls, path: str | None, B: int, n_params: int, tensors: tuple | None = None) -> GradReader | None:
        """None without a path; anything but float32 of shape (B, NP) is a usage error. ``tensors``: the
        :class:`~nxgates.core.ulp.Tensor` layout of a row, for a report of where the rows differ."""
        if path is None:
            return None
        regular_file(path, "--compare-grads")
        report = None
        if tensors is not None:
            from nxgates.core.ulp import UlpReport

            report = UlpReport(tensors)
        if path.endswith(".bin"):
            return cls(path, _raw_rows(path, B, n_params), report)
        _check_header(path, B, n_params)
        _check_kind(path)
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise ConfigError(f"--compare-grads {path}: no such file") from None
        except (OSError, ValueError, EOFError, RecursionError) as exc:  # RecursionError: a deep version 3.0 header
            raise ConfigError(f"--compare-grads {path}: not a readable .npy file ({exc})") from None
        if arr.dtype not in (np.dtype(F32), np.dtype(F32).newbyteorder()):  # either byte order is float32
            raise ConfigError(f"--compare-grads {path}: expected float32, got {arr.dtype}")
        if arr.shape != (B, n_params):
            raise ConfigError(f"--compare-grads {path}: shape {arr.shape} does not match (B, NP) = ({B}, {n_params})")
        try:
            return cls(path, arr, report)
        except OSError as exc:
            raise ConfigError(f"--compare-grads {path}: cannot read: {exc.strerror or exc}") from None

    def read(self, first: int, out: np.ndarray) -> None:
        """Rows ``first .. first+len(out)-1`` into ``out``."""
        if self.fh is None:  # Fortran order: rows are not contiguous in the file
            out[...] = self.arr[first : first + out.shape[0]]  # astype-like copy: converts the byte order too
            return
        self.fh.seek(self.arr.offset + first * self.arr.shape[1] * 4)
        if self.fh.readinto(memoryview(out).cast("B")) != out.nbytes:
            raise ConfigError(f"--compare-grads {self.path}: the file shrank while it was being read")
        if self.swapped:
            out.byteswap(inplace=True)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
        self.arr = None


def _raw_rows(path: str, B: int, n_params: int) -> np.ndarray:
    """A raw little-endian float32 dump of (B, NP), memory-mapped; its length must be exactly that."""
    expected = 4 * B * n_params
    size = os.stat(path).st_size
    if size != expected:
        raise ConfigError(f"--compare-grads {path}: {size} bytes, expected {expected} (raw float32 of shape "
                          f"(B, NP) = ({B}, {n_params}))")
    try:
        return np.memmap(path, dtype="<f4", mode="r", shape=(B, n_params))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--compare-grads {path}: cannot read: {exc}") from None


def _check_kind(path: str) -> None:
    """Only an ``.npy`` goes to numpy: an archive is refused as such (numpy would open it as an ``.npz``), and
    anything else is said to be no ``.npy`` (numpy's own message, about pickles, would mislead)."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(len(NPY_MAGIC))
    except OSError as exc:
        raise ConfigError(f"--compare-grads {path}: cannot read: {exc.strerror or exc}") from None
    if start[:4] in ZIP_MAGICS:
        raise ConfigError(f"--compare-grads {path}: an .npz archive, not an .npy array (use --save-grads' file)")
    if start != NPY_MAGIC:
        pickled = "; a pickle, never loaded" if start[:1] == b"\x80" else ""
        raise ConfigError(f"--compare-grads {path}: not a readable .npy file (it does not start with the .npy "
                          f"magic string{pickled}; a raw float32 dump must be named NAME.bin)")


def _check_header(path: str, B: int, n_params: int) -> None:
    """The ``.npy`` header read before numpy maps the file: a shape other than (B, NP) (negative, absurd) or
    a length other than the header's plus B*NP float32 cells is a usage error, never numpy's overflow or
    warning. A file without the ``.npy`` magic string is left to :func:`_check_kind`, an ``.npy`` of another
    format version to ``np.load``'s own messages."""
    from nxgates.core.npy import parse_npy_header

    where = f"--compare-grads {path}"
    try:
        with open(path, "rb") as fh:
            if fh.read(6) != NPY_MAGIC:
                return
            fh.seek(0)
            version = np.lib.format.read_magic(fh)
            if version not in ((1, 0), (2, 0)):
                return
            dtype, shape, _fortran = parse_npy_header(fh, version, where, "not a readable .npy file", HEADER_LIMIT)
            offset = fh.tell()
            size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(f"{where}: not a readable .npy file ({exc})") from None
    if tuple(shape) != (B, n_params):
        shown = str(tuple(shape))
        raise ConfigError(f"{where}: shape {shown[:60]} does not match (B, NP) = ({B}, {n_params})")
    want = offset + B * n_params * dtype.itemsize
    if size != want:
        how = "bytes after the data" if size > want else "the data is cut short"
        raise ConfigError(f"{where}: {size} bytes, not the {want} of a ({B}, {n_params}) "
                          f"{dtype} array ({how})")


class GradWriter:
    """``--save-grads``: the ``.npy`` header for float32 (B, NP), then each chunk's rows as they come.

    Written to a temporary file beside the target and renamed at the end, so a failed run leaves no
    half-written file and a path also given to ``--compare-grads`` is read intact.
    """

    def __init__(self, out: PendingOutput):
        self.path, self.fh, self.out = out.path, out.fh, out

    @classmethod
    def create(cls, path: str | None, B: int, n_params: int) -> GradWriter | None:
        if not path:
            return None
        out = open_output(path, "--save-grads")  # the one output policy of nxgates.safeio
        try:
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(F32)), "fortran_order": False,
                      "shape": (B, n_params)}
            np.lib.format.write_array_header_1_0(out.fh, header)  # what np.save writes for this array
        except OSError as exc:
            discard_output(out)
            raise ConfigError(f"--save-grads {path}: cannot write: {exc.strerror or exc}") from None
        return cls(out)

    def write(self, rows: np.ndarray) -> None:
        try:
            self.fh.write(memoryview(rows).cast("B"))
        except OSError as exc:
            raise ConfigError(f"--save-grads {self.path}: cannot write: {exc.strerror or exc}") from None

    def finish(self) -> None:
        commit_output(self.out)
        self.out = None

    def discard(self) -> None:
        """After :meth:`finish` nothing; otherwise the temporary file goes."""
        if self.out is not None:
            discard_output(self.out)
            self.out = None
