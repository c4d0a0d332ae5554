"""stdout that is closed, or whose reader went away: an I/O condition, never a traceback or a failed check."""

import os
import sys

import pytest

from nxgates import streams
from nxgates.errors import ConfigError


def test_writes_after_the_reader_went_away_are_dropped():
    r, w = os.pipe()
    os.close(r)
    with os.fdopen(w, "w") as raw:
        out = streams.ReaderSafe(raw)
        out.write("line\n")
        out.flush()  # EPIPE here: the reader is gone
        assert out.reader_gone
        out.write("more\n" * 1000)
        out.flush()
        assert os.path.samestat(os.fstat(raw.fileno()), os.stat(os.devnull))  # fd now on /dev/null
        assert not out.isatty()


def test_other_write_errors_are_not_swallowed(tmp_path):
    with open(tmp_path / "f", "w") as fh:
        out = streams.ReaderSafe(fh)
    with pytest.raises(ValueError):  # writing to a closed file is a bug, not a reader gone away
        out.write("x")


def test_a_closed_stdout_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)
    with pytest.raises(ConfigError, match="standard output is closed"):
        streams.require_stdout("the report")
    monkeypatch.setattr(sys, "stderr", None)
    human = streams.human_stream(to_stderr=True)  # closed stderr: the human report goes nowhere
    human.write("x")
    human.flush()
