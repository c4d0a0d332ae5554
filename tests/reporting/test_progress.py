"""Progress that names its gate: on a real terminal (a pty), each gate's header shows as it starts, above
a bar titled with the gate and its step; through a pipe, neither bar nor colour, and the lines as ever.

The runs are real processes on a real pseudo-terminal or pipe, so terminal detection itself is tested; only
the bar's delay is set to 0, so that a gate of a fraction of a second draws one.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from nxgates.reporting import github
from nxgates.reporting.console import Renderer, RichProgress

pty = pytest.importorskip("pty")

CODE = """
import sys
from nxgates.reporting import console
console.RichProgress.DELAY = 0.0  # a bar for every step, however short
from nxgates.cli import main
sys.argv[0] = "nxgates"
main()
"""


def run_cli(*args: str, terminal: bool, cwd: str) -> tuple[int, str]:
    """``nxgates ARGS`` in a child process, its stdout and stderr on a pseudo-terminal or on a pipe."""
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    command = [sys.executable, "-c", CODE, *args]
    if not terminal:
        out = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        return out.returncode, out.stdout + out.stderr
    master, slave = pty.openpty()
    try:
        child = subprocess.Popen(command, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return child.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_each_header_shows_before_its_bar_and_the_bar_names_the_gate(tmp_path):
    code, out = run_cli("run", "lora", "dp-train", terminal=True, cwd=str(tmp_path))
    assert code == 0
    assert "\x1b[" in out and "━" in out  # the terminal was seen: colour and a bar
    lora_header, lora_bar = out.index("# gate lora"), out.index("lora · gradcheck cells")
    dp_header, dp_bar = out.index("# gate dp-train"), out.index("dp-train · training steps")
    assert lora_header < lora_bar < dp_header < dp_bar
    assert out.count("# gate lora") == 1 and out.count("# gate dp-train") == 1  # not again when it ends


def test_quiet_on_a_terminal_keeps_the_named_bar_without_the_header(tmp_path):
    code, out = run_cli("run", "parallel-grad", "-q", terminal=True, cwd=str(tmp_path))
    assert code == 0
    assert "parallel-grad · examples: serial, parallel, re-run" in out
    assert "# gate" not in out


def test_a_planted_fault_is_named_in_the_header_before_the_bar(tmp_path):
    code, out = run_cli("run", "lora", "--inject", "grad-bug", terminal=True, cwd=str(tmp_path))
    assert code == 1
    assert out.index("# gate lora [fault injected: grad-bug]") < out.index("lora · gradcheck cells")


def test_through_a_pipe_no_bar_no_colour_and_each_header_above_its_lines(tmp_path):
    code, out = run_cli("run", "lora", "dp-train", terminal=False, cwd=str(tmp_path))
    assert code == 0
    assert "\x1b[" not in out and "\r" not in out and "━" not in out and "·" not in out
    lines = out.splitlines()
    assert lines[0] == "# gate lora"
    assert lines.count("# gate dp-train") == 1 and lines[lines.index("# gate dp-train") - 1].startswith("NX-")


def test_the_bar_is_titled_with_gate_and_step():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    bar = RichProgress(tty, delay=0, gate="lora")
    bar.start("gradcheck cells", 4)
    bar.advance(2)
    assert bar.title() == "lora · gradcheck cells"
    bar.stop()
    assert "lora · gradcheck cells" in tty.getvalue()
    assert RichProgress(tty).title() == "" and RichProgress(tty).delay == RichProgress.DELAY


def test_a_header_shown_at_the_start_is_not_repeated_at_the_end():
    from nxgates.gatekit import GateOutput
    from nxgates.runner import GateReport

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = GateOutput()
    out.check("a check", True)
    tty = Tty()
    renderer = Renderer(tty)
    renderer.begin("g")
    renderer.gate(GateReport("g", {}, out, 0.1))
    renderer.gate(GateReport("g", {}, out, 0.1))  # the next gate, never begun: its header when it ends
    assert tty.getvalue().count("# gate g") == 2
    piped = io.StringIO()
    plain = Renderer(piped)
    plain.begin("g")
    assert piped.getvalue() == ""  # plain output keeps a gate's lines together, written when it ends


def failing_doc(n: int) -> dict:
    checks = [{"name": f"check {i}", "passed": False, "detail": "off"} for i in range(n)]
    gate = {"name": "g", "passed": False, "seconds": 0.5, "params": {}, "fault": None, "error": None,
            "checks": checks, "metrics": {}}
    return {"nxgates": "0.1.0", "passed": False, "gates": [gate], "environment": {}}


@pytest.mark.parametrize(("summary", "append", "pointer"), [
    (None, False, ""),  # --annotations github off GitHub: no summary written, none pointed to
    ("summary.md", False, "; see the summary in {path}"),  # --summary PATH
    ("step_summary", True, "; see the job summary"),  # on GitHub Actions: $GITHUB_STEP_SUMMARY
])
def test_the_notice_says_where_the_summary_went_or_nothing(tmp_path, summary, append, pointer):
    path = None if summary is None else str(tmp_path / summary)
    lines: list[str] = []
    github.publish(github.GitHubOutput(True, path, append), failing_doc(12), lines.append)
    assert lines[-1] == ("::notice::2 more failed checks not annotated (GitHub shows 10 errors per step)"
                         + pointer.format(path=path))
