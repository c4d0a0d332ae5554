"""Reading the files a user names, bounded.

A config, a log or a gradient file that turns out to be ``/dev/zero``, a FIFO nobody writes to, or a
multi-gigabyte file must end in one line and exit 2, at once: never 24 GB of memory, a hang or a
traceback. Every file nxgates reads on a user's behalf goes through here.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from nxgates.core.memory import fmt_bytes
from nxgates.errors import ConfigError

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
        raise ConfigError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{what} {path}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{what} {path}: not a regular file (a device, FIFO or socket)")
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
                raise ConfigError(f"{what} {path}: larger than {fmt_bytes(limit)}")
            with open(p, "rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"{what} {path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ConfigError(f"{what} {path}: larger than {fmt_bytes(limit)}")
    return data


def read_text(path: str | Path, what: str, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8; undecodable bytes are a usage error naming the file."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None
