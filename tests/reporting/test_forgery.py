"""Outside text (file names, a plugin's gate, check and detail texts, parameter values) cannot forge output:
no line of ours starts a GitHub workflow command, no line separator splits a line, no escape sequence or
rich markup reaches a terminal, and the JUnit XML, the HTML page and the job summary stay well-formed."""

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import numpy as np
import pytest

from nxgates import streams
from nxgates.gatekit import GateOutput
from nxgates.reporting import github
from nxgates.reporting.console import Renderer
from nxgates.reporting.junit_report import junit_text
from nxgates.reporting.listing import gate_list
from nxgates.runner import GateReport

#: every character Python's str.splitlines breaks a line at
SEPARATORS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
FORGED = "::warning title=forged::pwned"
#: outside text at its worst: every separator, a forged command after each, colours, markup, bytes not UTF-8
HOSTILE = ("".join(f"{sep}{FORGED}" for sep in SEPARATORS)
           + " \x1b[31mred\x1b[0m [bold]b[/bold] \x00 \udcff ##[stop-commands]t")


def no_forgery(lines: list[str]) -> None:
    """No line is read as a workflow command, colours a terminal or fails to encode as UTF-8."""
    for line in lines:
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line and "\x1b" not in line, line
        line.encode("utf-8")


def hostile_report() -> GateReport:
    out = GateOutput()
    out.info(f"saved to {HOSTILE}")
    out.check(f"check {HOSTILE}", False, f"differs from {HOSTILE}")
    out.check("multi-line", False, "2 figures moved since b.json:\nfirst\n" + FORGED)
    return GateReport(f"gate{HOSTILE}", {"N": 3}, out, 0.5, fault=f"f{HOSTILE}")


# ---- the one function every output uses -------------------------------------------------------------------


@pytest.mark.parametrize("sep", list(SEPARATORS))
def test_no_separator_splits_a_shown_line(sep):
    text = streams.shown(f"a{sep}b")
    assert len(text.splitlines()) == 1 and text.isprintable()
    assert text == repr(f"a{sep}b")[1:-1]  # as repr writes it


def test_controls_surrogates_and_bidi_are_escaped_printable_text_is_not():
    assert streams.shown("a\x1b[31mb\x00\x7f\x9b") == "a\\x1b[31mb\\x00\\x7f\\x9b"
    assert streams.shown(os.fsdecode(b"r\xff.xml")) == "r\\xff.xml"  # the byte a non-UTF-8 name carried
    assert streams.shown("\ud800 \u202e \ufffe") == "\\ud800 \\u202e \\ufffe"
    normal = " PASS T1 caf\u00e9 -- 8 examples x 192 cells, 50% [ok] \\ tab-free"
    assert streams.shown(normal) == normal
    assert streams.shown("one\ntwo\rthree", keep_newlines=True) == "one\ntwo\\rthree"


def test_a_line_never_starts_a_workflow_command():
    assert streams.safe_line("::warning::x") == "\\x3a:warning::x"
    assert streams.safe_line("  \u3000::error::x") == "  \u3000\\x3a:error::x"  # the runner trims leading blanks
    assert streams.safe_line("text ##[set-env name=A]b") == "text ##\\x5bset-env name=A]b"
    assert streams.safe_line(" PASS T4 a::b") == " PASS T4 a::b"


# ---- the human report -------------------------------------------------------------------------------------


def test_the_renderer_neutralises_every_outside_text():
    shown = io.StringIO()
    renderer = Renderer(shown, verbose=True)
    renderer.gate(hostile_report())
    renderer.line(f"# crosscheck {HOSTILE}")
    lines = shown.getvalue().splitlines()
    no_forgery(lines)
    # names, fault, information lines, verdicts: one line each, whatever they hold
    assert lines[0].startswith("# gate gate\\r::warning") and lines[0].endswith("##\\x5bstop-commands]t]")
    assert lines[1].startswith("saved to \\r::warning") and lines[1].endswith("\\xff ##\\x5bstop-commands]t")
    hostile_line = streams.safe_line(streams.shown(HOSTILE))
    assert lines[2] == f" FAIL check {hostile_line} -- differs from \\r::warning title=forged::pwned"
    assert lines[-1] == f"# crosscheck {hostile_line}"
    # a detail's own lines stay lines (a baseline's figures), each neutralised
    assert lines[3].startswith("\\x3a:warning title=forged::pwned\\x0b::warning title=forged::pwned\\x0c")
    assert lines[4:7] == [" FAIL multi-line -- 2 figures moved since b.json:", "first",
                          "\\x3a:warning title=forged::pwned"]
    assert len(lines) == 10  # gate, info, 2 checks (2 lines and 3), count, verdict, crosscheck line


def test_on_a_terminal_outside_text_is_neither_markup_nor_escape_sequences():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    renderer = Renderer(tty)
    assert renderer.console is not None
    out = GateOutput()
    out.check("c", False, "[bold]x[/bold] [/] \x1b[31mred")
    renderer.check(out.checks[0])
    text = tty.getvalue()
    assert "[bold]x[/bold] [/] \\x1b[31mred" in text  # as typed: not markup, and the escape shown, not sent
    assert "\x1b[31mred" not in text


def test_a_stream_that_cannot_encode_a_character_gets_it_escaped():
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    out = streams.ReaderSafe(strict)
    out.write("name r\udcff.xml\n")
    out.flush()
    assert raw.getvalue() == b"name r\\udcff.xml\n" and not out.stopped


def test_list_lines_of_a_plugin_gate_are_neutralised():
    entry = SimpleNamespace(name="evil\n::error::x", aliases=("a\x1b[2J",), origin="dist\u2028x", broken=None,
                            description="desc\r::warning::y")
    lines = list(gate_list([entry]))
    assert len(lines) == 2
    no_forgery(lines)
    assert "evil\\n::error::x" in lines[1] and "desc\\r::warning::y" in lines[1]


# ---- GitHub annotations and the job summary ---------------------------------------------------------------


def hostile_doc() -> dict:
    from nxgates.reporting.json_report import to_json

    return to_json([hostile_report()])


def test_each_annotation_is_one_line_and_the_only_command_on_it():
    lines = github.annotations(hostile_doc())
    assert len(lines) == 2
    for line in lines:
        assert len(line.splitlines()) == 1 and line.startswith("::error title=gate")
        assert "\x1b" not in line and "##[" not in line
        line.encode("utf-8")
        title = line.split("::")[1]
        assert title.count(":") == 0 and "," not in title.partition("=")[2]  # %3A, %2C: the title ends at ::
    assert lines[1].endswith("::2 figures moved since b.json:%0Afirst%0A::warning title=forged::pwned")


def markdown_html(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(text)


def test_backticks_in_a_detail_cannot_close_the_summarys_code_block():
    doc = hostile_doc()
    doc["gates"][0]["checks"][0]["detail"] = "before\n```\n# Forged heading\n[link](https://evil.example)\n````"
    text = github.summary_markdown(doc)
    html = markdown_html(text)
    assert "<h1>" not in html and 'href="https://evil.example"' not in html
    assert "# Forged heading" in html  # shown, inside the code block
    fence = next(line for line in text.splitlines() if line.strip().startswith("`````"))
    assert fence.strip() == "`````"  # one longer than the longest run inside


def test_summary_text_outside_code_cannot_link_tag_or_split():
    doc = hostile_doc()
    doc["gates"][0]["checks"][0]["name"] = "[click](https://evil.example) <img src=x> `code"
    doc["gates"][0]["params"] = {"mode": "a`b"}
    text = github.summary_markdown(doc)
    html = markdown_html(text)
    assert 'href="https://evil.example"' not in html and "<img" not in html
    assert "``mode=a`b``" in text  # a code span longer than the backtick inside
    for line in text.splitlines():
        assert "\x1b" not in line and "\x85" not in line and "\u2028" not in line
    text.encode("utf-8")
    rows = html.split("<tbody>")[1].split("</tbody>")[0].split("</tr>")[:-1]
    assert len(rows) == 2 and all(row.count("<td>") == 4 for row in rows)  # no pipe or newline broke a row


# ---- JUnit XML and HTML -----------------------------------------------------------------------------------

XML_FORBIDDEN = "".join(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r") + "\ud800\udcff\ufffe\uffff"


def test_junit_with_every_character_xml_forbids_is_well_formed():
    out = GateOutput()
    out.check(f"name {XML_FORBIDDEN}", False, f"detail {XML_FORBIDDEN}\r\nsecond line")
    report = GateReport(f"g{XML_FORBIDDEN}", {}, out, 0.1)
    text = junit_text([report])
    root = ET.fromstring(text.encode("utf-8"))  # strict UTF-8, and a parser that refuses what XML forbids
    case = root.find("testsuite/testcase")
    assert case.get("name").startswith("name \\x00\\x01") and "\\ud800\\xff\\ufffe\\uffff" in case.get("name")
    failure = case.find("failure")
    assert failure.text.startswith("detail \\x00") and failure.text.endswith("\\r\nsecond line")


def test_the_html_page_of_hostile_text_is_utf8_and_shows_it_escaped():
    from nxgates.reporting.html import html_text
    from tests.reporting.test_html import parse

    text = html_text(hostile_doc())
    text.encode("utf-8")
    parse(text)  # well-formed, nothing fetched
    assert "\x1b" not in text and "\x00" not in text
    assert "\\x1b[31mred" in text and "\\xff" in text and "\\x00" in text


# ---- the CLI end to end: names that are neither safe nor UTF-8 --------------------------------------------


def nxgates(tmp_path, *args: str | bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The console script in a subprocess, stdout strict UTF-8, as in a CI container with a UTF-8 locale."""
    environ = {**os.environ, "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1", **(env or {})}
    environ.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-m", "nxgates", *args], cwd=tmp_path, env=environ,
                          capture_output=True, timeout=120)


@pytest.fixture
def grads(tmp_path):
    """A saved gradient file, and one cell of it moved: T4 then FAILs naming the file in its detail."""
    r = nxgates(tmp_path, "run", "parallel-grad", "-q", "--save-grads", "g.npy")
    assert r.returncode == 0, r.stderr
    moved = np.load(tmp_path / "g.npy")
    moved.flat[5] = np.nextafter(moved.flat[5], np.float32(np.inf))
    np.save(tmp_path / "moved.npy", moved)
    return tmp_path


def test_hostile_file_names_forge_no_workflow_command(grads):
    compare = b"x\n::warning title=t::pwned\x1b[31m\n.npy"
    save = b"s\r::stop-commands::pwned\x85.npy"
    os.link(grads / "moved.npy", grads / os.fsdecode(compare))
    r = nxgates(grads, "run", "parallel-grad", "--compare-grads", compare, "--save-grads", save,
                env={"GITHUB_ACTIONS": "true"})
    assert r.returncode == 1, r.stderr
    lines = r.stdout.decode("utf-8").splitlines()
    commands = [line for line in lines if line.lstrip().startswith("::")]
    assert [c.split(" ")[0] for c in commands] == ["::error"]  # ours, and only ours
    no_forgery([line for line in lines if line not in commands])
    (saved,) = [line for line in lines if "saved per-example gradients" in line]
    assert "s\\r::stop-commands::pwned\\x85.npy" in saved  # the name on its one line, escaped
    assert (grads / os.fsdecode(save)).exists()


def test_non_utf8_report_names_are_written_and_never_exit_3(grads):
    names = {flag: b"r\xff" + flag.strip("-").encode() for flag in ("--json", "--junit", "--html", "--summary")}
    os.link(grads / "moved.npy", grads / os.fsdecode(b"m\xff.npy"))
    args = [a for flag, name in names.items() for a in (flag, name)]
    r = nxgates(grads, "run", "parallel-grad", "--compare-grads", b"m\xff.npy", *args)
    assert r.returncode == 1, r.stderr  # T4 fails; the reports are written
    assert b"m\\xff.npy" in r.stdout and b"internal error" not in r.stderr
    for flag, name in names.items():
        data = (grads / os.fsdecode(name)).read_bytes()
        data.decode("utf-8")
        if flag == "--json":  # the check's detail names the file as a line shows it, escaped
            assert "m\\xff.npy" in json.loads(data)["gates"][0]["checks"][3]["detail"]  # shown, as on screen
        else:
            assert b"m\\xff.npy" in data, flag
    ET.fromstring((grads / os.fsdecode(names["--junit"])).read_bytes())
    r = nxgates(grads, "run", "parallel-grad", "-q", "--junit", "-", "--compare-grads", b"m\xff.npy")
    assert r.returncode == 1 and b"internal error" not in r.stderr
    ET.fromstring(r.stdout)


def test_an_error_line_names_a_hostile_path_escaped(tmp_path):
    r = nxgates(tmp_path, "run", "lora", "--json", b"no\x1b[31m\xff\n/r.json")
    assert r.returncode == 2
    assert r.stderr.decode("utf-8").splitlines() == [
        "nxgates: error: --json no\\x1b[31m\\xff\\n/r.json: directory no\\x1b[31m\\xff\\n does not exist"]


def test_a_progress_label_is_not_rich_markup():
    from nxgates.reporting.console import RichProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = RichProgress(tty, delay=0)
    bar.start("cells [bold]x[/] \x1b[31m", 10)  # "[/]" closes nothing: as markup it would raise
    bar.advance(4)
    bar.stop()
    assert "cells [bold]x[/] \\x1b[31m" in tty.getvalue()
