"""Standard output that may be closed, or whose reader may go away (``nxgates run all | head -1``).

Neither is a failed check nor a bug: the verdict stays the exit status. A closed stdout is refused before
anything runs; after a reader closes the pipe (EPIPE), human output stops quietly and the run goes on, so
``--json``/``--junit`` files are still written whole.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import TextIO

from nxgates.errors import ConfigError


def require_stdout(why: str) -> TextIO:
    """``sys.stdout``, or a one-line usage error when the process was started with it closed (``>&-``)."""
    if sys.stdout is None:
        raise ConfigError(f"standard output is closed: nowhere to write {why} (redirect it, e.g. >/dev/null)")
    return sys.stdout


def is_reader_gone(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


def silence(stream: TextIO | None) -> None:
    """Point ``stream``'s file descriptor at /dev/null (Python's documented idiom after EPIPE), so the
    writes still buffered, and the interpreter's flush at exit, go nowhere instead of failing again."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


#: beyond the control characters: line and paragraph separators (``str.splitlines`` breaks at them), bidi
#: controls (which reorder a line on screen), and U+FFFE, U+FFFF (no XML document may hold them)
_ESCAPED = frozenset("\u2028\u2029\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                     "\ufffe\uffff")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    """One character as a backslash escape, as ``repr`` writes it; a byte a non-UTF-8 file name carried
    (``os.fsdecode``'s surrogateescape, U+DC80..U+DCFF) as that byte, ``\\xff``."""
    code = ord(ch)
    if ch in _SHORT:
        return _SHORT[ch]
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _needs_escape(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code <= 0xDFFF or ch in _ESCAPED


def shown(text: object, *, keep_newlines: bool = False) -> str:
    """Outside text (a file name, a plugin's check or detail, a parameter) made safe to print: every
    control character, line separator, bidi control and lone surrogate as a visible backslash escape
    (``\\n``, ``\\x1b``, ``\\u2028``, ``\\xff``), so it can neither split a line, colour a terminal nor
    fail to encode. ``keep_newlines`` leaves ``\\n`` a line break, for text whose lines are meant (a
    check's multi-line detail). Printable text is returned as it is."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(_escape(ch) if _needs_escape(ch) and not (keep_newlines and ch == "\n") else ch
                   for ch in text)


def safe_line(line: str) -> str:
    """A line nxgates prints, never read as a GitHub workflow command: one that would start with ``::``
    (after leading blanks, as the runner reads it) has its first colon escaped, and ``##[`` (the runner's
    legacy command prefix, read anywhere in a line) its bracket. ``line`` must already be :func:`shown`."""
    if line.lstrip().startswith("::"):
        at = line.index(":")
        line = f"{line[:at]}\\x3a{line[at + 1:]}"
    return line.replace("##[", "##\\x5b")


def printable_lines(text: str) -> list[str]:
    """``text`` as the lines to print: split at its own newlines only, each :func:`shown` and :func:`safe_line`."""
    return [safe_line(shown(part)) for part in str(text).split("\n")]


class ReaderSafe:
    """Wraps a text stream: once a write fails (EPIPE: the reader has gone; ENOSPC: /dev/full, a full
    disk), every further write is dropped and the run goes on. ``error`` keeps a failure that was not
    EPIPE, for the caller to report once the gates and the report files are done."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.reader_gone = False
        self.error: OSError | None = None

    @property
    def stopped(self) -> bool:
        return self.reader_gone or self.error is not None

    def _stop(self, exc: OSError) -> None:
        if is_reader_gone(exc):
            self.reader_gone = True
        else:
            self.error = exc
        silence(self.stream)

    def write(self, text: str) -> int:
        if not self.stopped:
            try:
                self.stream.write(text)
            except UnicodeEncodeError:  # a stream that cannot take a character (ASCII, strict UTF-8): escaped
                self.write(text.encode(self._encoding(), "backslashreplace").decode(self._encoding()))
            except OSError as exc:
                self._stop(exc)
        return len(text)

    def _encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    def flush(self) -> None:
        if not self.stopped:
            try:
                self.stream.flush()
            except OSError as exc:
                self._stop(exc)

    def isatty(self) -> bool:
        return not self.stopped and bool(getattr(self.stream, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.stream.fileno()


class Discard:
    """A stream for closed stderr: what would have gone there goes nowhere."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def human_stream(to_stderr: bool) -> TextIO:
    """Where the human report goes: stdout (must be open), or stderr when a report takes stdout."""
    if to_stderr:
        return ReaderSafe(sys.stderr) if sys.stderr is not None else Discard()  # type: ignore[return-value]
    return ReaderSafe(require_stdout("the report"))  # type: ignore[return-value]


def write_stdout(text: str) -> None:
    """A whole report to stdout; a reader that went away is not an error (the exit status is the verdict)."""
    out = ReaderSafe(require_stdout("the report"))
    out.write(text)
    out.flush()
    if out.error is not None:
        raise ConfigError(f"cannot write the report to standard output: {out.error.strerror or out.error}")


def check_written(stream: TextIO) -> None:
    """After a run: a human report that stdout could not take (not a reader gone away) is exit 2."""
    error = getattr(stream, "error", None)
    if error is not None and getattr(stream, "stream", None) is not sys.stderr:  # stderr: nobody to tell
        raise ConfigError(f"cannot write the report to standard output: {error.strerror or error}")


def stdout_to_stderr(when: bool) -> contextlib.ExitStack:
    """While gates run, ``sys.stdout`` goes to stderr ``when`` stdout carries a report (``--json -``), so a
    gate's ``print()`` cannot corrupt it; ``close()`` the result to restore it. Writes to file descriptor 1
    itself (a C library, a child process) are beyond this."""
    stack = contextlib.ExitStack()
    if when:
        stack.enter_context(contextlib.redirect_stdout(sys.stderr if sys.stderr is not None else Discard()))
    return stack
