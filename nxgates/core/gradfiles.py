"""Per-example gradient files: ``--save-grads`` writes a float32 (B, NP) ``.npy`` chunk by chunk,
``--compare-grads`` reads one back a chunk at a time, so neither holds B rows in memory."""

from __future__ import annotations

import numpy as np

from nxgates.core.tape import F32
from nxgates.errors import ConfigError
from nxgates.safeio import PendingOutput, commit_output, discard_output, open_output, regular_file


class GradReader:
    """``--compare-grads``: a saved float32 (B, NP) ``.npy``, validated as a memory map and read a chunk at a
    time into a reused buffer (file reads, so its pages never pile up in this process)."""

    def __init__(self, path: str, arr: np.ndarray):
        self.path = path
        self.arr = arr
        self.fh = open(path, "rb") if arr.flags.c_contiguous else None  # noqa: SIM115 (closed by close())
        self.swapped = arr.dtype != np.dtype(F32)  #: the other byte order: swapped after reading, bits kept

    @classmethod
    def open(cls, path: str | None, B: int, n_params: int) -> GradReader | None:
        """None without a path; anything but float32 of shape (B, NP) is a usage error."""
        if path is None:
            return None
        regular_file(path, "--compare-grads")
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise ConfigError(f"--compare-grads {path}: no such file") from None
        except (OSError, ValueError, EOFError) as exc:
            raise ConfigError(f"--compare-grads {path}: not a readable .npy file ({exc})") from None
        if not isinstance(arr, np.ndarray):  # np.load opens a zip archive as an NpzFile
            arr.close()
            raise ConfigError(f"--compare-grads {path}: an .npz archive, not an .npy array (use --save-grads' file)")
        if arr.dtype not in (np.dtype(F32), np.dtype(F32).newbyteorder()):  # either byte order is float32
            raise ConfigError(f"--compare-grads {path}: expected float32, got {arr.dtype}")
        if arr.shape != (B, n_params):
            raise ConfigError(f"--compare-grads {path}: shape {arr.shape} does not match (B, NP) = ({B}, {n_params})")
        try:
            return cls(path, arr)
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
