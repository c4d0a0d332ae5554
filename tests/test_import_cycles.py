"""No import cycles: nxgates' modules (every import, function-level ones included) and the benchmarks'.

A cycle makes import order matter and hides which module is the lower layer; the walker reads the source
with ``ast`` (nothing is imported), so an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def module_names(root: Path, package: str | None) -> dict[str, Path]:
    """Every module under ``root``: dotted names under ``package``, or bare file names (a script folder)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if package is None:
            names[".".join(parts)] = path
            continue
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join([package, *parts])] = path
    return names


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # `from a.b import c` names a.b (or a.b.c, below)
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, one level up per extra dot
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                add(submodule if submodule in known else source)
    return found


def import_graph(root: Path, package: str | None) -> dict[str, set[str]]:
    known = module_names(root, package)
    return {name: imported(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None (depth-first search, colouring the modules)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_nxgates_has_no_import_cycle():
    graph = import_graph(ROOT / "nxgates", "nxgates")
    assert "nxgates.core.pool.local" in graph["nxgates.core.pool"]  # the walker sees the package's modules
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_benchmarks_have_no_import_cycle():
    graph = import_graph(ROOT / "benchmarks", None)
    assert "measure" in graph["bench"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("files, cycle", [
    ({"__init__.py": "", "a.py": "from pkg import b\n", "b.py": "import pkg.a\n"}, ["pkg.a", "pkg.b", "pkg.a"]),
    # function-level and relative imports count too
    ({"__init__.py": "", "a.py": "def f():\n    from .sub import c\n",
      "sub/__init__.py": "", "sub/c.py": "from ..a import f\n"}, ["pkg.a", "pkg.sub.c", "pkg.a"]),
    # a package that imports its module, which imports the package's name back
    ({"__init__.py": "from pkg.core import x\n", "core.py": "from pkg import y\nx = 1\n"},
     ["pkg", "pkg.core", "pkg"]),
])
def test_a_planted_cycle_is_found_and_named(tmp_path, files, cycle):
    write(tmp_path / "pkg", files)
    assert find_cycle(import_graph(tmp_path / "pkg", "pkg")) == cycle


def test_an_acyclic_package_passes(tmp_path):
    write(tmp_path / "pkg", {"__init__.py": "from pkg.b import y\n", "a.py": "x = 1\n",
                             "b.py": "from . import a\ny = a.x\n"})
    graph = import_graph(tmp_path / "pkg", "pkg")
    assert graph == {"pkg": {"pkg.b"}, "pkg.a": set(), "pkg.b": {"pkg.a"}}
    assert find_cycle(graph) is None


def test_a_planted_cycle_between_scripts_is_found(tmp_path):
    write(tmp_path, {"bench.py": "from bench_dask import measure\n",
                     "bench_dask.py": "def m():\n    from bench import child\n"})
    assert find_cycle(import_graph(tmp_path, None)) == ["bench", "bench_dask", "bench"]
