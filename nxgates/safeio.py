"""Reading the files a user names, bounded; writing the files nxgates makes, never over anything but a
regular file.

A config, a log or a gradient file that turns out to be ``/dev/zero``, a FIFO nobody writes to, or a
multi-gigabyte file must end in one line and exit 2, at once: never 24 GB of memory, a hang or a
traceback. Every file nxgates reads on a user's behalf goes through here.

A path in an error line is :func:`nxgates.streams.shown`: a name holding a newline, an escape sequence or
bytes that are not UTF-8 is named escaped, on one line.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from nxgates.errors import ConfigError
from nxgates.streams import shown
from nxgates.units import fmt_bytes

TOML_LIMIT = 1 << 20  #: a gates.toml is a few KiB; 1 MiB is generous
LOG_LIMIT = 64 << 20  #: a seed's stdout, failing-cell lines included, at the largest sizes


def regular_file(path: str | Path, what: str) -> Path:
    """``path`` if it names a regular file (after symlinks); otherwise a one-line :class:`ConfigError`.

    Devices, FIFOs and sockets are refused without being opened, so nothing can block or stream forever.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise ConfigError(f"{what} {shown(path)}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{what} {shown(path)}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{what} {shown(path)}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{what} {shown(path)}: not a regular file (a device, FIFO or socket)")
    return p


def read_bytes(path: str | Path, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file (or of stdin for ``-``); larger is an error, not a truncation."""
    if str(path) == "-":
        stream = sys.stdin.buffer if sys.stdin is not None else None
        if stream is None:
            raise ConfigError(f"{what} -: standard input is closed")
        try:
            data = stream.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"{what} -: cannot read standard input: {exc.strerror or exc}") from None
    else:
        p = regular_file(path, what)
        try:
            if p.stat().st_size > limit:
                raise ConfigError(f"{what} {shown(path)}: larger than {fmt_bytes(limit)}")
            with open(p, "rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"{what} {shown(path)}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ConfigError(f"{what} {shown(path)}: larger than {fmt_bytes(limit)}")
    return data


def read_text(path: str | Path, what: str, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8; undecodable bytes are a usage error naming the file."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {shown(path)}: not UTF-8 text (byte {exc.start})") from None


# ---- writing: one policy for every file nxgates writes ----------------------------------------------------
#
# A report, a gradient file or a selftest document is written only to a new path or over an existing
# regular file whose last component is not a symlink: never through a symlink (a dangling one would
# create its target), never onto a device, FIFO or socket. The data goes to a temporary file beside the
# target, created with mode 0o666 so the umask applies (an existing file's mode is kept), and is renamed
# over the target at the end, so a stopped run leaves the old file or the new one, never half of one.


def output_path(path: str, flag: str, *, stdout_ok: bool = True) -> None:
    """Refuse, before any work, an output ``path`` the policy above forbids (one line, exit 2).

    ``-`` is standard output where ``stdout_ok``; elsewhere it is refused rather than made a file named ``-``.
    """
    if path == "":
        raise ConfigError(f"{flag}: empty path")
    if path == "-":
        if stdout_ok:
            return
        raise ConfigError(f"{flag} needs a file path ('-' is not standard output here)")
    st = _lstat_output(path, flag)
    parent = os.path.dirname(path) or "."
    if st is None:
        try:
            parent_ok = os.path.isdir(parent)
        except OSError as exc:
            raise ConfigError(f"{flag} {shown(path)}: cannot write: {exc.strerror or exc}") from None
        if not parent_ok:
            raise ConfigError(f"{flag} {shown(path)}: directory {shown(parent)} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {shown(path)}: cannot write: Permission denied (directory {shown(parent)})")
    if st is not None and not os.access(path, os.W_OK):
        raise ConfigError(f"{flag} {shown(path)}: cannot write: Permission denied")


def _lstat_output(path: str, flag: str) -> os.stat_result | None:
    """The target's own status (not a symlink's target's), None for a new path; refuses what may not be
    written."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{flag} {shown(path)}: cannot write: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(f"{flag} {shown(path)}: refusing to write: is a symlink; give the file it points to")
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{flag} {shown(path)}: is a directory, not a regular file")
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):  # opening one would block until a reader comes
        raise ConfigError(f"{flag} {shown(path)}: is a FIFO or socket; refusing to write: not a regular file "
                          "(write to '-' and pipe that instead)")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{flag} {shown(path)}: refusing to write: not a regular file (a device)")
    return st


class PendingOutput(NamedTuple):
    """An output being written: the open temporary file, its name, and the path it will be renamed to."""

    fh: BinaryIO
    tmp: str
    path: str
    flag: str


def open_output(path: str, flag: str) -> PendingOutput:
    """A temporary file beside ``path`` (checked by :func:`output_path`), to :func:`commit_output` at the end."""
    existing = _lstat_output(path, flag)
    directory = os.path.dirname(path) or "."
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".nxgates-{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as for any file a command creates
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"{flag} {shown(path)}: cannot write: {exc.strerror or exc}") from None
    else:
        raise ConfigError(f"{flag} {shown(path)}: cannot write: no free temporary name in {shown(directory)}")
    if existing is not None:
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(existing.st_mode))
    return PendingOutput(os.fdopen(fd, "wb"), tmp, path, flag)


def commit_output(out: PendingOutput) -> None:
    """Close the temporary file and rename it over its path, checked again: meanwhile it may have become a
    symlink or a device, which a rename would replace."""
    try:
        out.fh.close()
        _lstat_output(out.path, out.flag)
        os.replace(out.tmp, out.path)
    except OSError as exc:
        discard_output(out)
        raise ConfigError(f"{out.flag} {shown(out.path)}: cannot write: {exc.strerror or exc}") from None
    except ConfigError:
        discard_output(out)
        raise


def discard_output(out: PendingOutput) -> None:
    """Close and remove the temporary file: the target is left as it was."""
    with contextlib.suppress(OSError):
        out.fh.close()
    with contextlib.suppress(OSError):
        os.unlink(out.tmp)


@contextlib.contextmanager
def output_file(path: str, flag: str) -> Iterator[BinaryIO]:
    """The file to write ``path``'s new content to, under the policy above: committed when the block ends,
    discarded (the target left as it was) when it raises; a write that fails is one line naming ``flag``."""
    out = open_output(path, flag)
    try:
        yield out.fh
    except OSError as exc:
        discard_output(out)
        raise ConfigError(f"{flag} {shown(path)}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        discard_output(out)
        raise
    commit_output(out)


def write_output(path: str, data: bytes, flag: str) -> None:
    """``data`` written whole to ``path`` under the policy above."""
    with output_file(path, flag) as fh:
        fh.write(data)


def same_file_key(path: str) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names, following symlinks; None for a path that names nothing yet.

    Two paths with one key are one file, whatever their spelling: symlinks and hardlinks included.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def distinct_files(paths: dict[str, str | None]) -> None:
    """Two options naming one file would lose one of them (a report overwritten by the other, a log or
    gradients overwritten while read): exit 2. Paths are compared as real paths, and existing files by
    device and inode, so ``./r.json``, a symlink and a hardlink all count as the same file."""
    seen: dict[object, str] = {}
    for flag, path in paths.items():
        if path == "":
            raise ConfigError(f"{flag}: empty path")
        if path is None or path == "-":
            continue
        try:
            real = os.path.realpath(path)
        except OSError as exc:  # e.g. the current directory was deleted under us
            raise ConfigError(f"{flag} {path}: cannot resolve the path: {exc.strerror or exc}") from None
        for key in (real, same_file_key(path)):
            if key is None:
                continue
            if key in seen:
                raise ConfigError(f"{seen[key]} and {flag} name the same file {path}; give each its own")
            seen[key] = flag
