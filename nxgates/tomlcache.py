"""The packaged gates.toml's parse, cached the way Python caches bytecode.

Importing tomllib and parsing gates.toml cost a few milliseconds of every start-up, for a file that
only changes when nxgates does. The cache holds the exact text it was made from and what ``tomllib.loads``
made of it, marshalled; it is used only when that text equals the file's text now, character for character,
so an edited gates.toml is never answered from an old parse. A cache that is missing, stale, truncated,
not marshal data, not a regular file or unreadable is ignored without a word: the text is parsed again.

The registry writes it, best effort and atomically, where Python would write bytecode (not under
``python -B`` or PYTHONDONTWRITEBYTECODE; ``make compile`` writes it regardless, as compileall writes
bytecode). Only the packaged gates.toml is cached, in the package's own ``__pycache__``: whoever can write
there can already change nxgates' code. A ./gates.toml or ``--config`` file, which may sit anywhere, is
always parsed.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import sys
from pathlib import Path
from typing import Any

FORMAT = "nxgates gates.toml cache 1"  #: the first item of a cache; another format is ignored
CACHE_LIMIT = 8 << 20  #: bytes; a gates.toml is at most 1 MiB (safeio.TOML_LIMIT), its cache a few times that


def cache_path(source: Path) -> Path | None:
    """Where ``source``'s cache lives: ``__pycache__/NAME.<python tag>.marshal`` beside it (None: no tag)."""
    tag = sys.implementation.cache_tag
    return None if tag is None else source.parent / "__pycache__" / f"{source.name}.{tag}.marshal"


def read(cache: Path, text: str) -> dict[str, Any] | None:
    """The cached parse of ``text``, or None when ``cache`` does not hold one that can be trusted."""
    try:
        fd = os.open(cache, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO put there must not block
    except OSError:
        return None
    try:
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            blob = fh.read(CACHE_LIMIT + 1)
        if len(blob) > CACHE_LIMIT:
            return None
        cached = marshal.loads(blob)
    except (OSError, ValueError, EOFError, TypeError):  # unreadable, truncated, not marshal data
        return None
    if (isinstance(cached, tuple) and len(cached) == 3 and cached[0] == FORMAT and cached[1] == text
            and isinstance(cached[2], dict)):
        return cached[2]
    return None


def write(cache: Path, text: str, data: dict[str, Any]) -> bool:
    """Store ``data``, the parse of ``text``, in ``cache``: whole or not at all, never an error."""
    try:
        blob = marshal.dumps((FORMAT, text, data))
    except ValueError:  # a TOML date or time: not marshallable; such a file is simply parsed each time
        return False
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # never through a planted symlink
    except OSError:  # a read-only install, a full disk, another process's leftover: parse next time too
        return False
    try:
        with open(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, cache)  # readers see the old cache or the new one, never half of one
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True
