"""The command line at its odd corners. A terminal with ``COLUMNS=0`` still gets the report; an
error names what is really wrong (``crosscheck all``, ``lora-train --executor``, an empty ``--scheduler``);
a CRLF ``.nx`` source reads as CRLF logs do; a huge path is cut in an error line."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import threading
from pathlib import Path

import pytest

from tests.behaviour.from_outside import SCRIPT, assert_one_line_error, nx
from tests.oracles.seed_logs import lora_log

DATA = Path(__file__).parent.parent / "data"


def on_a_terminal(args: list[str], cwd: Path, columns: str, timeout: float = 60) -> tuple[int, str]:
    """``nxgates ARGS`` with stdout and stderr on a pseudo-terminal; its exit status and everything shown. A
    command still running after ``timeout`` seconds is killed and fails the test."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": columns, "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([SCRIPT, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, start_new_session=True)
    os.close(follower)
    killed = []

    def kill() -> None:
        killed.append(timeout)
        proc.kill()

    hung = threading.Timer(timeout, kill)
    hung.start()
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:  # ended; a worker of its may still hold the terminal
                break
        code = proc.wait()
    finally:
        hung.cancel()
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shown = b"".join(chunks).decode(errors="replace")
    assert not killed, f"nxgates {' '.join(args)} still running after {timeout} s: {shown[-1500:]}"
    return code, shown


TERMINAL_RUNS = {
    "run-green": (["run", "lora"], 0, "GREEN"),
    "run-red": (["run", "lora", "--inject", "grad-bug"], 1, "RED"),
    "crosscheck": (["crosscheck", "lora", "run.log"], 0, "CROSSCHECK GREEN"),
}


@pytest.mark.parametrize("case", sorted(TERMINAL_RUNS))
def test_columns_zero_on_a_terminal_still_shows_the_report(tmp_path, case):
    args, code, verdict = TERMINAL_RUNS[case]
    (tmp_path / "run.log").write_text(lora_log())
    got_code, shown = on_a_terminal(args, tmp_path, "0")
    assert got_code == code and verdict in shown, (got_code, shown[-1500:])


@pytest.mark.parametrize("case", sorted(TERMINAL_RUNS))
def test_a_normal_terminal_shows_the_report(tmp_path, case):
    args, code, verdict = TERMINAL_RUNS[case]
    (tmp_path / "run.log").write_text(lora_log())
    got_code, shown = on_a_terminal(args, tmp_path, "100")
    assert got_code == code and verdict in shown, (got_code, shown[-1500:])


def test_crosscheck_all_does_not_offer_all(tmp_path):
    (tmp_path / "run.log").write_text(lora_log())
    r = nx("crosscheck", "all", "run.log", cwd=tmp_path)
    assert_one_line_error(r, "all")
    assert "or 'all'" not in r.stderr


def test_executor_for_a_gate_without_a_pool_names_the_option(tmp_path):
    r = nx("run", "lora-train", "--executor", "dask", cwd=tmp_path)
    assert_one_line_error(r, "lora-train", "--executor")
    assert "--set executor" not in r.stderr


def test_an_empty_scheduler_address_is_named_as_such(tmp_path):
    r = nx("run", "parallel-grad", "--scheduler", "", cwd=tmp_path)
    assert_one_line_error(r, "--scheduler")
    assert "executor=thread" not in r.stderr


def test_a_crlf_source_reads_as_its_lf_twin(tmp_path):
    (tmp_path / "run.log").write_text(lora_log())
    (tmp_path / "gate.nx").write_bytes((DATA / "nx_intfp_lora_gradcheck_gate.nx").read_bytes()
                                       .replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    r = nx("crosscheck", "lora", "run.log", "-q", "--source", "gate.nx", cwd=tmp_path)
    assert r.returncode == 0 and "CROSSCHECK GREEN" in r.stdout, r.stdout + r.stderr


def test_a_crlf_log_is_accepted(tmp_path):
    (tmp_path / "run.log").write_bytes(lora_log().replace("\n", "\r\n").encode())
    r = nx("crosscheck", "lora", "run.log", "-q", cwd=tmp_path)
    assert r.returncode == 0 and "CROSSCHECK GREEN" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("option", ["--config", "--json", "--junit", "--compare-grads", "--save-grads"])
def test_a_five_thousand_character_path_is_cut_in_the_error(tmp_path, option):
    path = "a/" * 2500
    args = ["run", "parallel-grad", option, path] if option != "--config" else ["run", "lora", option, path]
    r = nx(*args, cwd=tmp_path)
    assert_one_line_error(r)
    assert len(r.stderr) < 1200 and path not in r.stderr


def test_a_five_thousand_character_log_path_is_cut_in_the_error(tmp_path):
    path = "b" * 5000
    r = nx("crosscheck", "lora", path, cwd=tmp_path)
    assert_one_line_error(r)
    assert len(r.stderr) < 1200
