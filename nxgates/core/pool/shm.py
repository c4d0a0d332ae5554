"""Files of nxgates' in ``/dev/shm`` (memory a run's processes map by path), named after the process that made
them, so that a run killed before it could remove its own (SIGKILL) does not leave them there for ever.

A file is ``nxgates-<kind>-<pid>-<start>-<random>``: ``start`` is the owner's start time (clock ticks after
boot, the 22nd field of ``/proc/PID/stat``), so a pid the kernel has since given to another process does not
pass for the owner. :func:`reclaim_stale` removes the files whose owner is gone; :func:`nxgates.core.pool.make_pool`
calls it, so the next run that makes a pool reclaims what a killed one left. A live process's files are never
removed, and a name of another form is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile

PREFIX = "nxgates-"
#: kind, owner pid, owner start time, then mkstemp's random part
_OWNED = re.compile(r"nxgates-([a-z]+)-(\d+)-(\d+)-")


def shm_dir() -> str:
    """``/dev/shm`` where there is one (memory, not disk), else the temp dir."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot); None if it does not run (gone, or a zombie that
    will never run again) or the system has no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # the command name, in parentheses, may hold spaces
    try:
        state, start = fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
    return None if state in (b"Z", b"X") else start


def _has_proc() -> bool:
    return process_start(os.getpid()) is not None


def owner_tag(pid: int | None = None) -> str:
    """``<pid>-<start>`` of process ``pid`` (this one by default), as this module's file names carry it; the
    start is 0 where there is no ``/proc``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{process_start(pid) or 0}"


def owner_alive(pid: int, start: int) -> bool:
    """Whether the process that made a file tagged ``pid``-``start`` still runs. A process of another user
    that ``/proc`` hides counts as alive (not ours to judge); without ``/proc`` the pid alone decides."""
    began = process_start(pid)
    if began is not None:
        return began == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _has_proc()  # it can be signalled, yet /proc says it does not run: a zombie


def make_file(kind: str, nbytes: int) -> str:
    """A new file of ``nbytes`` (at least 1) in :func:`shm_dir`, tagged with this process as its owner; the
    caller removes it when done with it."""
    fd, path = tempfile.mkstemp(prefix=f"{PREFIX}{kind}-{owner_tag()}-", dir=shm_dir())
    try:
        os.ftruncate(fd, max(1, nbytes))
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return path


def _owned(directory: str | None) -> list[tuple[str, int, int]]:
    """(path, pid, start) of each file of this module's naming in ``directory``."""
    directory = directory or shm_dir()
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        if (match := _OWNED.match(name)) is not None:
            found.append((os.path.join(directory, name), int(match[2]), int(match[3])))
    return found


def owned_files(pid: int | None = None, directory: str | None = None) -> list[str]:
    """The files process ``pid`` (this one by default) made and has not removed."""
    pid = os.getpid() if pid is None else pid
    start = process_start(pid) or 0
    return sorted(path for path, owner, began in _owned(directory) if (owner, began) == (pid, start))


def reclaim_stale(directory: str | None = None) -> list[str]:
    """Remove the files whose owner no longer runs (killed before it could remove them); the paths removed."""
    removed = []
    for path, pid, start in _owned(directory):
        if not owner_alive(pid, start) and os.path.isfile(path):
            with contextlib.suppress(OSError):  # reclaimed by another run first, or not ours to remove
                os.unlink(path)
                removed.append(path)
    return removed
