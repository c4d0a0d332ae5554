"""GitHub Actions: failed checks as ``::error`` workflow commands, and a Markdown job summary.

Both are made from the JSON report's document (:func:`nxgates.reporting.json_report.to_json`), so the
annotations, the summary and ``--json`` cannot disagree. Off GitHub Actions neither appears unless asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from nxgates.errors import ConfigError
from nxgates.streams import shown

#: GitHub shows at most this many error annotations of one step; the rest are counted in one notice
MAX_ERRORS = 10
#: a failing detail longer than this is cut in the summary's table (the full text is in --json)
DETAIL_CHARS = 300


class GitHubOutput(NamedTuple):
    """What a run writes for GitHub: annotations on the human stream, and where the summary goes."""

    annotate: bool
    summary_path: str | None  #: --summary PATH (written), or $GITHUB_STEP_SUMMARY (appended to)
    append: bool


def resolve(annotations: str | None, summary: str | None, env: Mapping[str, str] | None = None) -> GitHubOutput | None:
    """The GitHub output a run asked for: on the platform by default, elsewhere only by option; None if none."""
    env = os.environ if env is None else env
    on_platform = env.get("GITHUB_ACTIONS") == "true"
    annotate = annotations == "github" or (annotations is None and on_platform)
    path, append = summary, False
    if path is None and on_platform and annotations != "none" and env.get("GITHUB_STEP_SUMMARY"):
        path, append = env["GITHUB_STEP_SUMMARY"], True
    if not annotate and path is None:
        return None
    return GitHubOutput(annotate, path, append)


def escape_data(text: str) -> str:
    """A workflow command's message: GitHub decodes ``%25``, ``%0D`` and ``%0A``; a raw newline would end it.
    Every other control character is shown escaped (:func:`nxgates.streams.shown`): GitHub's log draws ANSI
    colours, and a form feed or U+2028 splits a line where a reader of the log sees it. ``##[``, the
    runner's legacy command prefix, is broken as on every line nxgates prints."""
    return "%0D".join(shown(part, keep_newlines=True).replace("%", "%25").replace("\n", "%0A")
                      for part in text.split("\r")).replace("##[", "##\\x5b")


def escape_property(text: str) -> str:
    """A property value (``title=``): also ``:`` and ``,``, which would end the value early."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def failures(doc: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(gate, check, detail) of every failed check, in run order."""
    for gate in doc["gates"]:
        for check in gate["checks"]:
            if not check["passed"]:
                yield gate["name"], check["name"], check["detail"]


def annotations(doc: dict[str, Any], summary: str | None = "the job summary") -> list[str]:
    """``::error title=GATE: CHECK::detail`` per failed check, at most :data:`MAX_ERRORS`, then a notice that
    points to ``summary``, where every failed check is listed (None: no summary was written, so no pointer)."""
    failed = list(failures(doc))
    lines = [f"::error title={escape_property(f'{gate}: {check}')}::{escape_data(detail or 'FAIL')}"
             for gate, check, detail in failed[:MAX_ERRORS]]
    more = len(failed) - MAX_ERRORS
    if more > 0:
        where = f"; see {escape_data(summary)}" if summary else ""
        lines.append(f"::notice::{more} more failed check{'s' * (more > 1)} not annotated (GitHub shows "
                     f"{MAX_ERRORS} errors per step){where}")
    return lines


def _inline(text: object) -> str:
    """Outside text safe in a line of Markdown: controls escaped, and no link, image, HTML tag or code span
    can start in it (``](`` and `````` ` `````` backslash-escaped, ``<`` as ``&lt;``)."""
    text = shown(str(text).replace("\r\n", " ").replace("\r", " ").replace("\n", " "))
    return text.replace("\\", "\\\\").replace("](", "\\](").replace("`", "\\`").replace("<", "&lt;")


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell: no pipe or newline breaks the row."""
    return _inline(text).replace("|", "\\|")


def _code(text: object) -> str:
    """A code span of outside text: the fence one backtick longer than any run inside it (CommonMark)."""
    text = shown(str(text))
    fence = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _longest_run(text: str, char: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return longest


def _short(text: str) -> str:
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 3] + "..."


def _figures(gate: dict[str, Any]) -> list[str]:
    """The scalar figures a reader compares across runs: the gate's integers, strings and short numbers."""
    shown = []
    for key, value in gate.get("metrics", {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        if len(text) > 24:  # digests: their first characters identify them
            text = text[:16] + "..."
        shown.append(f"{key}={text}")
    return shown


def summary_markdown(doc: dict[str, Any]) -> str:
    """The job summary: a verdict, a table of gates and checks, each gate's figures, the failing details."""
    verdict = "PASSED" if doc["passed"] else ("INTERRUPTED" if doc.get("interrupted") else "FAILED")
    lines = [f"## nxgates: {verdict}", "", "| gate | check | result | detail |", "| --- | --- | --- | --- |"]
    for gate in doc["gates"]:
        for check in gate["checks"]:
            result = "PASS" if check["passed"] else "**FAIL**"
            lines.append(f"| {_cell(gate['name'])} | {_cell(check['name'])} | {result} | "
                         f"{_cell(_short(check['detail']))} |")
    lines.append("")
    for gate in doc["gates"]:
        fault = f", fault planted: {_code(gate['fault'])}" if gate.get("fault") else ""
        params = " ".join(f"{k}={v}" for k, v in gate["params"].items())
        lines.append(f"**{_inline(gate['name'])}** ({'passed' if gate['passed'] else 'FAILED'}, "
                     f"{gate['seconds']:.3f} s{fault}): {_code(params)}")
        figures = _figures(gate)
        if figures:
            lines.append("")
            lines.append("figures: " + ", ".join(_code(f) for f in figures))
        lines.append("")
    failed = list(failures(doc))
    if failed:
        lines.append("### Failing details")
        lines.append("")
        for gate, check, detail in failed:
            lines.append(f"- **{_inline(gate)}: {_inline(check)}**")
            lines.append("")
            body = [shown(line) for line in (detail or "FAIL").split("\n")]
            fence = "`" * max(3, 1 + max(_longest_run(line, "`") for line in body))  # no line can close it
            lines.append(f"  {fence}")
            lines.extend(f"  {line}" for line in body)
            lines.append(f"  {fence}")
        lines.append("")
    return "\n".join(lines) + "\n"


def check_writable(out: GitHubOutput | None) -> None:
    """Fail before any gate runs when the summary could not be written (exit 2)."""
    from nxgates.reporting import files

    if out is not None and out.summary_path is not None:
        files.check_writable(out.summary_path, "--summary" if not out.append else "$GITHUB_STEP_SUMMARY")


def summary_place(out: GitHubOutput) -> str | None:
    """Where the summary goes, in words: the job summary on GitHub Actions, the ``--summary`` file elsewhere,
    None when none is written (``--annotations github`` off GitHub)."""
    if out.summary_path is None:
        return None
    return "the job summary" if out.append else f"the summary in {out.summary_path}"


def publish(out: GitHubOutput, doc: dict[str, Any], echo: Any) -> None:
    """Print the annotations with ``echo`` (the human stream) and write or append the summary."""
    if out.annotate:
        for line in annotations(doc, summary_place(out)):
            echo(line)
    if out.summary_path is None:
        return
    text = summary_markdown(doc)
    if not out.append:
        from nxgates.reporting import files

        files.write_text(out.summary_path, text, "--summary")
        return
    try:  # GitHub concatenates what every step appends to this file
        with Path(out.summary_path).open("a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
    except OSError as exc:
        raise ConfigError(f"$GITHUB_STEP_SUMMARY {out.summary_path}: cannot write: {exc.strerror or exc}") from None
