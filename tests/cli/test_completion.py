"""Shell completion: each kind of word the shell completes, asked as a shell asks (click's completion
protocol), and the script `nxgates completion SHELL` prints."""

import os
import shutil
import subprocess
import sys

import pytest
from click.shell_completion import ShellComplete

from nxgates.cli import cli


@pytest.fixture(autouse=True)
def packaged_registry(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./gates.toml: the packaged registry


def complete(line: str) -> dict[str, str | None]:
    """What Tab offers after ``line`` (the words after ``nxgates``; a trailing space starts a new word)."""
    words = line.split()
    args, incomplete = (words, "") if line.endswith(" ") or not line else (words[:-1], words[-1])
    items = ShellComplete(cli, {}, "nxgates", "_NXGATES_COMPLETE").get_completions(args, incomplete)
    return {item.value: item.help for item in items if item.type == "plain"} | {
        f"<{item.type}>": None for item in items if item.type != "plain"}


def test_commands():
    assert set(complete("")) >= {"run", "list", "show", "selftest", "crosscheck", "export", "diff", "completion"}
    assert list(complete("se")) == ["selftest"]


def test_gate_names_and_aliases():
    offered = complete("run ")
    assert {"all", "lora", "lora-gradcheck", "parallel-grad", "ta-parallel-grad", "dp-train"} <= set(offered)
    assert offered["lora-gradcheck"] == "alias of lora"
    assert set(complete("run lora-")) == {"lora-gradcheck", "lora-train"}
    assert "all" not in complete("show ")  # show takes one gate
    assert "lora" in complete("selftest ") and "lora" in complete("export ")


def test_plugin_gates_are_offered(tmp_path, monkeypatch):
    from nxgates.registry import catalog
    from nxgates.registry.entry import GateEntry

    plugin = GateEntry("my-gate", "my_gate", "a plugin's gate", ("mine",), origin="my-dist 1.0")
    monkeypatch.setattr(catalog.Registry, "plugins", lambda self: {"my-gate": plugin})
    assert {"my-gate", "mine"} <= set(complete("run m"))


def test_presets_of_the_chosen_gates():
    offered = complete("run lora --preset ")
    assert list(offered) == ["seed", "medium", "large", "xl"]
    assert offered["medium"] == "T=8 DM=96 R=4"
    assert set(complete("run lora dp-train --preset m")) == {"medium"}


def test_faults_of_the_chosen_gate():
    offered = complete("run lora --inject ")
    assert set(offered) == {"grad-bug", "missing-rescale", "transposed-b", "train-base"}
    assert offered["grad-bug"].startswith("lora: caught by gradcheck A")
    assert set(complete("run parallel-grad --inject s")) == {"shared-arena", "single-worker"}


def test_set_names_with_their_types():
    offered = complete("run lora --set ")
    assert {"T=", "DM=", "R=", "delta=", "tol_permil="} <= set(offered)
    assert offered["DM="].startswith("int in [1, ")
    assert "D=" not in offered  # parallel-grad's, not lora's
    assert set(complete("run lora parallel-grad --set lora.D")) == {"lora.DM="}
    assert set(complete("run parallel-grad --set executor=t")) == {"executor=thread"}
    assert set(complete("export lora --set R")) == {"R="}


def test_executor_and_reduction_values():
    assert set(complete("run parallel-grad --executor ")) == {"auto", "thread", "process", "dask"}
    assert set(complete("run all --reduction ")) == {"tree", "sequential"}
    assert complete("run lora --reduction ") == {}  # lora sums no floats: nothing to offer


@pytest.mark.parametrize("line", ["run lora --json ", "run lora --config ", "run lora --inputs ",
                                  "run parallel-grad --compare-grads ", "diff ", "diff a.json ",
                                  "crosscheck lora ", "export lora --out ", "selftest --json "])
def test_file_names_where_a_path_is_due(line):
    assert complete(line) == {"<file>": None}


def test_a_broken_registry_offers_nothing_rather_than_a_traceback(tmp_path):
    (tmp_path / "gates.toml").write_text("[gates.lora\n")
    assert complete("run ") == {}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_clicks_script(invoke, shell):
    r = invoke("completion", shell)
    assert r.exit_code == 0
    assert "_NXGATES_COMPLETE" in r.stdout and f"{shell}_complete" in r.stdout
    if shell == "bash":  # `--set KEY=` is not followed by a space: the value comes next
        assert "[[ $value == *= ]] && compopt -o nospace" in r.stdout


def test_completion_refuses_another_shell(invoke):
    r = invoke("completion", "tcsh")
    assert r.exit_code == 2 and "tcsh" in r.stderr


@pytest.mark.console_script
def test_the_installed_script_answers_the_shells_protocol(tmp_path):
    """What bash's function runs: the console script with the words typed so far in the environment."""
    script = os.path.join(os.path.dirname(sys.executable), "nxgates")
    env = {**os.environ, "_NXGATES_COMPLETE": "bash_complete", "COMP_WORDS": "nxgates run lora --preset m",
           "COMP_CWORD": "4"}
    out = subprocess.run([script], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["plain,medium"]


def bash_offers(monkeypatch, *words: str) -> list[str]:
    """What bash's function gets back for COMP_WORDS as bash splits them (at '=' too), the last one current."""
    from nxgates.cli.completion import bash_class

    monkeypatch.setenv("COMP_WORDS", "\n".join(["nxgates", *words]))
    monkeypatch.setenv("COMP_CWORD", str(len(words)))
    return bash_class()(cli, {}, "nxgates", "_NXGATES_COMPLETE").complete().split("\n")


def test_bash_completes_set_across_the_equals_sign_it_splits_at(monkeypatch):
    assert bash_offers(monkeypatch, "run", "lora", "--set", "D") == ["plain,DM="]
    assert bash_offers(monkeypatch, "run", "parallel-grad", "--set", "executor", "=", "th") == ["plain,thread"]
    assert set(bash_offers(monkeypatch, "run", "parallel-grad", "--set", "reduction", "=")) == {
        "plain,tree", "plain,sequential"}
    assert bash_offers(monkeypatch, "run", "lora", "--set", "DM", "=") == [""]  # an integer: no gate names
    assert bash_offers(monkeypatch, "run", "lora", "--json", "=") == ["file,"]  # --opt=VALUE, as click does
    assert bash_offers(monkeypatch, "run", "lora", "--json", "=", "re") == ["file,re"]
    assert bash_offers(monkeypatch, "run", "lora", "--preset", "=", "m") == ["plain,medium"]


@pytest.mark.skipif(not shutil.which("bash"), reason="no bash")
@pytest.mark.console_script
def test_in_bash_itself(tmp_path):
    """The script as bash sources it, its function called as bash calls it on Tab."""
    bindir = os.path.dirname(sys.executable)
    script = """
eval "$(nxgates completion bash)"
offer() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
          _nxgates_completion nxgates 2>/dev/null; echo "${COMPREPLY[*]}"; }
offer nxgates ru
offer nxgates run lora --preset m
offer nxgates run lora --set D
offer nxgates run parallel-grad --set executor = th
"""
    out = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert out.stdout.splitlines() == ["run", "medium", "DM=", "thread"], out.stderr
