"""Where a LocalCluster's workers keep their scratch space: a directory of nxgates' own in the temp dir.

Dask's workers make ``dask-scratch-space`` in the temp dir and a stopped or killed run leaves it behind.
Ours go into ``nxgates-dask-<pid>-<random>`` instead, which the pool removes when it closes; a run that
could not (kill -9) leaves one whose owner is dead, and the next start of a Dask pool removes those.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "nxgates-dask-"


def make_scratch() -> str:
    """A fresh scratch directory for this process's cluster, after sweeping those of dead processes."""
    sweep_stale()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def remove_scratch(path: str | None) -> None:
    """Remove a scratch directory and everything in it; never raises."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def sweep_stale() -> None:
    """Remove the scratch directories whose process is gone (a run killed before it could clean up)."""
    try:
        entries = list(Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"))
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(PREFIX):].partition("-")[0]
        if pid_text.isdigit() and entry.is_dir() and not _alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive, not ours to judge
        return True
    return True
