"""The ``nxgates`` command line: the group, its commands (one module each, imported when used) and the
console script. Exit codes follow pytest: 0 pass, 1 fail, 2 usage, 3 internal, 130 Ctrl-C (143 SIGTERM)."""

from __future__ import annotations

import os
import sys

import click

from nxgates import __version__
from nxgates.cli.group import NxGroup
from nxgates.errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

COMMANDS = {
    "list": "nxgates.cli.list_show:list_cmd",
    "show": "nxgates.cli.list_show:show_cmd",
    "run": "nxgates.cli.run:run_cmd",
    "selftest": "nxgates.cli.selftest:selftest_cmd",
    "crosscheck": "nxgates.cli.crosscheck:crosscheck_cmd",
    "diff": "nxgates.cli.diff:diff_cmd",
    "export": "nxgates.cli.export:export_cmd",
    "completion": "nxgates.cli.completion:completion_cmd",
}


@click.group(cls=NxGroup, context_settings=CONTEXT, lazy_commands=COMMANDS)
@click.version_option(__version__, "-V", "--version", prog_name="nxgates")
def cli() -> None:
    """Run the NX gates: small programs that prove one property of numerical training code.

    Exit codes: 0 every check passed, 1 a check failed or a gate timed out, 2 usage or configuration error,
    3 internal error (a bug), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).

    \b
    Examples:
      nxgates list
      nxgates show lora
      nxgates run all
      nxgates run lora --set DM=64 --set R=4 --json report.json
      nxgates run parallel-grad --executor dask
      nxgates run all --baseline baseline.json
      nxgates diff before.json after.json
      nxgates crosscheck lora seed-run.log --source nx_intfp_lora_gradcheck_gate.nx
      nxgates completion bash > ~/.nxgates-complete.bash
    """


def main() -> None:
    """The console script: like ``cli()``, but never waits at exit for a worker stuck past its timeout.

    SIGTERM (SIGHUP) stops a run like Ctrl-C (finished gates' reports written, one line), exit 143 (129).
    """
    import threading

    from nxgates.cli import signals

    signals.install_stop_handlers()
    code = cli.main(standalone_mode=False)
    signals.ignore_stop_signals()  # the verdict is decided: a signal now must not turn it into a crash
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    deadline = sys.modules.get("nxgates.deadline")  # imported only when a plugin gate ran
    if deadline is not None:
        stuck += deadline.abandoned_threads()  # a plugin's run past its deadline: it may hold the GIL at exit
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_HANGUP) or stuck:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except OSError:
                pass  # a reader gone or a full disk: nothing left to tell anyone
        os._exit(code)
    import gc

    gc.freeze()  # the run is over: shutdown's last collection need not trace every object (~20 ms of a run)
    sys.exit(code)
