"""Start-up: `nxgates run lora` imports only what its run uses. Which modules, never how long it
takes (benchmarks/bench.py times it)."""

import subprocess
import sys
import tomllib

from nxgates import registry, tomlcache

#: imported by a run only for other paths: hashing (--repeat reads the digest), parsing gates.toml (its
#: parse is cached), plugins' entry points, pools, JSON and JUnit reports, rich (stdout is not a terminal),
#: the other commands, matplotlib and the HTML page (--html); numpy.ma (15 ms), which np.unique imports when
#: asked for the values alone, is needed by nothing
NOT_NEEDED = ("hashlib", "tomllib", "importlib.metadata", "nxgates.core.pool", "concurrent.futures",
              "multiprocessing", "json", "xml.etree.ElementTree", "rich.console", "nxgates.plugins", "numpy.ma",
              "nxgates.reporting.json_report", "nxgates.reporting.junit_report", "nxgates.registry.plugin_gates",
              "nxgates.cli.list_show", "nxgates.cli.selftest", "nxgates.cli.crosscheck", "matplotlib",
              "nxgates.reporting.html")

CODE = """
import sys
from pathlib import Path

import click, numpy, rich

from nxgates import tomlcache

tomlcache.cache_path = lambda source: Path(sys.argv[1])  # the test's cache, not the package's
before = set(sys.modules)
from nxgates.cli import cli

code = cli.main(["run", "lora", "-q"], standalone_mode=False)
print(code, " ".join(sorted(set(sys.modules) - before)))
"""


def imported_by_run_lora(tmp_path, cache) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", CODE, str(cache)], capture_output=True, text=True, check=True,
                         cwd=tmp_path)  # no ./gates.toml there: the packaged registry
    code, modules = out.stdout.splitlines()[-1].split(" ", 1)
    return int(code), set(modules.split())


def test_run_lora_imports_nothing_it_does_not_use(tmp_path):
    text = registry.PACKAGED_CONFIG.read_text(encoding="utf-8")
    cache = tmp_path / "gates.toml.marshal"
    assert tomlcache.write(cache, text, tomllib.loads(text))
    code, modules = imported_by_run_lora(tmp_path, cache)
    assert code == 0
    assert "nxgates.gates.lora" in modules and "nxgates.cli.run" in modules  # the run happened, and is seen
    assert sorted(m for m in NOT_NEEDED if m in modules) == []
    # no other gate: only lora's package and the modules the gates share (nxgates.gates._*)
    assert not any(m.startswith("nxgates.gates.") and not f"{m}.".startswith("nxgates.gates.lora.")
                   and not m.startswith("nxgates.gates._") for m in modules)


def test_without_the_cache_the_same_run_parses_gates_toml(tmp_path):
    """The check above can see tomllib: with no cache to read, the run imports it."""
    code, modules = imported_by_run_lora(tmp_path, tmp_path / "no-such-dir" / "gates.toml.marshal")
    assert code == 0 and "tomllib" in modules
