"""How every way a command can end becomes one line on stderr and a documented exit code.

Exit codes follow pytest: 0 pass, 1 fail, 2 usage, 3 internal, 130 Ctrl-C (143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import errno
import sys

import click

from nxgates.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, ConfigError, NxError, Terminated

ERROR_LINE_LIMIT = 1000  #: characters of an error line; whatever a user typed, it stays one readable line


def one_line(text: str) -> str:
    """``text`` on one line of at most about :data:`ERROR_LINE_LIMIT` characters, its control characters
    escaped and never read as a GitHub workflow command (an error line often quotes a file name)."""
    from nxgates.streams import safe_line, shown

    line = safe_line(shown(" ".join(str(text).split())))
    if len(line) <= ERROR_LINE_LIMIT:
        return line
    keep = ERROR_LINE_LIMIT // 2  # cut the middle: an error line ends with its reason
    return f"{line[:keep]} ...({len(line) - 2 * keep} characters cut)... {line[-keep:]}"


def stop_reason(exc: BaseException | None) -> tuple[str, int]:
    """What stopped a run, as words and exit code: Ctrl-C 130, SIGTERM 143, SIGHUP 129."""
    if isinstance(exc, Terminated):
        return exc.what, exc.exit_code
    return "interrupted", EXIT_INTERRUPTED


class Stopped(Exception):
    """Ctrl-C or SIGTERM, carried past click (which would print a blank line and forget which it was)."""

    def __init__(self, cause: KeyboardInterrupt):
        what, self.exit_code = stop_reason(cause)
        super().__init__(what)


class ReaderGone(Exception):
    """stdout's reader went away (EPIPE), carried past click (which would exit 1: a failed check)."""


def carried_past_click(exc: KeyboardInterrupt | OSError) -> BaseException:
    """The exception to raise out of a command in place of ``exc``, so that :func:`exit_code_of` still
    knows what happened once click has seen it; ``exc`` itself when it is none of those cases."""
    from nxgates.streams import is_reader_gone, silence

    if isinstance(exc, KeyboardInterrupt):
        return Stopped(exc)
    if is_reader_gone(exc):
        return ReaderGone()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):  # `nxgates list >/dev/full`
        silence(sys.stdout)
        return ConfigError(f"cannot write the output: {exc.strerror or exc}")
    return exc


def exit_code_of(exc: BaseException, debug: bool) -> int:
    """Say on stderr, in one line, why a command ended with ``exc``, and return its exit code."""
    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    if isinstance(exc, Stopped):
        click.echo(f"nxgates: {exc}", err=True)
        return exc.exit_code
    if isinstance(exc, click.exceptions.Abort | KeyboardInterrupt):
        what, code = stop_reason(exc if isinstance(exc, Terminated) else exc.__cause__)
        click.echo(f"nxgates: {what}", err=True)
        return code
    if isinstance(exc, ReaderGone):  # `nxgates list | head -1`: the reader has what it wanted; not an error
        from nxgates.streams import silence

        silence(sys.stdout)
        return 0
    if isinstance(exc, click.ClickException):
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `nxgates`: the help itself, as click does
            click.echo(exc.format_message(), err=True)
        else:
            click.echo(f"nxgates: error: {one_line(exc.format_message())}", err=True)
        return EXIT_USAGE
    if isinstance(exc, NxError):
        click.echo(f"nxgates: error: {one_line(str(exc))}", err=True)
        return exc.exit_code
    if debug:  # a bug in nxgates itself
        import traceback

        traceback.print_exception(exc)
    click.echo(f"nxgates: internal error: {type(exc).__name__}: {one_line(str(exc))}"
               " (run with --debug for the traceback)", err=True)
    return EXIT_INTERNAL
