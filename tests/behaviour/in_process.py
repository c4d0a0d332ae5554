"""The console script's command line run inside the test's own process: the same ``nxgates.cli.cli`` the script
calls, through click's ``CliRunner``, in a given directory and environment, with what it did as a
:class:`~tests.behaviour.from_outside.Done`.

For the many variants of one behaviour whose process boundary adds nothing (how a figure is written, which
path is refused, which byte of a file is damaged): a variant costs milliseconds here and a third of a second as a
process of its own. Each behaviour keeps at least one case through the installed console script
(:func:`tests.behaviour.from_outside.nx`), so the boundary itself stays tested."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from click.testing import CliRunner

from tests.behaviour.from_outside import Done


def nx_here(*args: str, cwd: Path, env: dict | None = None, stdin: str | bytes | None = None) -> Done:
    """``nxgates ARGS`` run in this process from ``cwd``, with ``env`` (the whole environment, as for
    :func:`~tests.behaviour.from_outside.nx`) for its duration. An exception nxgates lets escape fails the test
    (as a traceback on the script's stderr would)."""
    from nxgates.cli import cli

    overrides = None
    if env is not None:
        overrides = {k: v for k, v in env.items() if os.environ.get(k) != v}
        overrides.update({k: None for k in os.environ if k not in env})
    started = time.perf_counter()
    with contextlib.chdir(cwd):
        r = CliRunner().invoke(cli, list(args), env=overrides, input=stdin, catch_exceptions=False)
    return Done(r.exit_code, r.stdout, r.stderr, time.perf_counter() - started)
