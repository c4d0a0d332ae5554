"""The baseline file: read whole, updated under a lock, replaced whole, never left half written.

Layout: ``{"format": 1, "entries": {KEY: ENTRY, ...}}`` as ``json.dumps(sort_keys=True, indent=2)`` plus a
newline, so it diffs well in review. Keys and entries this nxgates does not know are kept as they are (a
later version's entries survive an update by this one). A file of another format version, or one that is
not such a document, is refused (exit 2) and never overwritten.

An update takes an ``fcntl.flock`` on a sidecar ``FILE.lock`` (kept: removing it would let a third run lock
a fresh file while a second still holds the old one), reads the file under it, merges its entries in, writes
a temporary file in the same directory and renames it over the file (``os.replace``): two runs updating one
file at once both keep their entries, and a crash leaves the old file or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nxgates.baseline.cells import figure_problem, kind_of
from nxgates.errors import ConfigError
from nxgates.safeio import output_path, read_text
from nxgates.streams import shown

FORMAT = 1  #: the format version this nxgates reads and writes
SIZE_LIMIT = 64 << 20  #: cells are kept as digests, so even many gates at large sizes stay far below this
DEPTH_LIMIT = 64  #: lists and tables nested deeper are no document nxgates writes (a baseline nests 5 deep)


def load(path: str, flag: str) -> dict[str, Any]:
    """The document in ``path``; one line and exit 2 if it is missing, corrupt or of another format."""
    text = read_text(path, flag, SIZE_LIMIT)
    return parse(text, path, flag)


def parse(text: str, path: str, flag: str) -> dict[str, Any]:
    """A baseline document from its text, checked for what this nxgates needs of it: every entry a table,
    every pinned figure a value or a well-formed array record, so comparing with it cannot fail."""
    doc = json_document(text, f"{flag} {path}: not a baseline file")
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
        raise ConfigError(f"{flag} {path}: not a baseline file (no entries table)")
    if type(doc.get("format")) is not int or doc["format"] != FORMAT:
        raise ConfigError(f"{flag} {path}: baseline format {doc.get('format')!r}, this nxgates reads format "
                          f"{FORMAT}; regenerate it with --update-baseline into a new file")
    for key, entry in doc["entries"].items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{flag} {path}: entry {key}: {kind_of(entry)}, not a table")
        problem = figures_problem(entry.get("fingerprints", {}))
        if problem:
            raise ConfigError(f"{flag} {path}: entry {key}: {problem}")
    return doc


def json_document(text: str, refused: str) -> Any:
    """``text`` as JSON nested at most :data:`DEPTH_LIMIT` deep; ``refused`` starts the message otherwise."""
    try:
        doc = json.loads(text)
    except RecursionError:
        doc = None
        depth = DEPTH_LIMIT + 1
    except ValueError as exc:
        raise ConfigError(f"{refused} (corrupt JSON: {exc})") from None
    else:
        depth = nesting(doc)
    if depth > DEPTH_LIMIT:
        raise ConfigError(f"{refused} (JSON nested more than {DEPTH_LIMIT} levels deep)")
    return doc


def nesting(doc: Any) -> int:
    """How deep lists and tables nest in ``doc`` (0 for a scalar), counted without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth <= DEPTH_LIMIT:  # deeper is refused whatever lies below
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def figures_problem(figures: Any) -> str | None:
    """What is wrong with a table of pinned figures, naming the first bad one; None if nothing."""
    if not isinstance(figures, dict):
        return f"fingerprints is {kind_of(figures)}, not a table of figures"
    for name, value in figures.items():
        problem = figure_problem(value)
        if problem:
            return f"figure {name}: {problem}"
    return None


def dumps(doc: Mapping[str, Any]) -> str:
    """The file's text: sorted keys, indented, one trailing newline."""
    return json.dumps(doc, sort_keys=True, indent=2) + "\n"


def check_updatable(path: str, flag: str) -> None:
    """Before any gate runs: exit 2 now if ``path`` could not be updated later (and say why)."""
    target = _target(path, flag)
    if not target.parent.is_dir():
        raise ConfigError(f"{flag} {path}: directory {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: cannot write to directory {target.parent}")
    _check_lock(_lock_path(target), target, flag)
    if target.exists():
        load(path, flag)


def update(path: str, entries: Mapping[str, Mapping[str, Any]], flag: str) -> None:
    """Merge ``entries`` (by key) into the file at ``path``, creating it if need be; see the module's doc."""
    target = _target(path, flag)
    with _locked(target, flag):
        _target(path, flag)  # checked again under the lock: the file may have been replaced meanwhile
        doc = load(path, flag) if target.exists() else {"format": FORMAT, "entries": {}}
        doc["entries"].update(entries)
        _replace(target, dumps(doc), flag)


def _target(path: str, flag: str) -> Path:
    """``path`` if it may be written under nxgates' one output policy: absent or a regular file, never
    through a symlink (:func:`nxgates.safeio.output_path`)."""
    output_path(path, flag, stdout_ok=False)
    return Path(path)


def _lock_path(target: Path) -> Path:
    return target.with_name(target.name + ".lock")


def _check_lock(lock: Path, target: Path, flag: str) -> None:
    """The sidecar lock is absent or a regular file: a directory, a symlink, a FIFO or a device there is
    refused before any gate runs, not found once the gates ran (and a device is never opened)."""
    try:
        mode = os.lstat(lock).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{flag} {shown(target)}: cannot use {shown(lock)}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a symlink" if stat.S_ISLNK(mode)
                else "not a regular file")
        raise ConfigError(f"{flag} {shown(target)}: its lock file {shown(lock)} is {kind}; remove it")


@contextlib.contextmanager
def _locked(target: Path, flag: str) -> Iterator[None]:
    lock = _lock_path(target)
    _check_lock(lock, target, flag)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        raise ConfigError(f"{flag} {shown(target)}: cannot lock {shown(lock)}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the check and the open
            raise ConfigError(f"{flag} {shown(target)}: its lock file {shown(lock)} is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _replace(target: Path, text: str, flag: str) -> None:
    """Write ``text`` to a temporary file beside ``target``, flushed to disk, then rename it over ``target``."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"{flag} {target}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ConfigError(f"{flag} {target}: cannot write: {exc.strerror or exc}") from None
