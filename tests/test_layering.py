"""The layers of nxgates, held as one table: a module imports only from its own layer and the layers below.

The numerical core is the floor: it imports nothing of nxgates but the leaves. The table is the one place
the allowed directions are written; ``docs/design.md``'s module map is checked against it, and the walker
is :mod:`tests.test_import_cycles`' (every import, function-level ones included, read with ``ast``).
"""

from __future__ import annotations

import re

import pytest

from tests.test_import_cycles import ROOT, import_graph, write

#: lowest first: each layer's modules (a name covers the modules under it), and what the layer is for
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaves", ("nxgates", "nxgates.errors", "nxgates.units", "nxgates.labels", "nxgates.streams", "nxgates.safeio",
                "nxgates.tomlcache", "nxgates.deadline", "nxgates.environment", "nxgates.baseline.cells")),
    ("core", ("nxgates.core",)),
    ("gate contract", ("nxgates.gatekit", "nxgates.contract", "nxgates.plugins", "nxgates.registry",
                       "nxgates.tensors")),
    ("gates", ("nxgates.gates",)),
    ("runner", ("nxgates.runner",)),
    ("baselines", ("nxgates.baseline",)),
    ("run plan and reports", ("nxgates.plan", "nxgates.selftest", "nxgates.crosscheck", "nxgates.reporting")),
    ("front doors", ("nxgates.cli", "nxgates.pytest_plugin", "nxgates.__main__")),
]


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]]) -> int:
    """The layer of ``module``: the one naming the longest prefix of it."""
    best, level = -1, -1
    for i, (_name, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), i
    return level


def upward_imports(graph: dict[str, set[str]], layers: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Every import that runs to a higher layer, as 'a (layer) -> b (layer)'; and any module in no layer."""
    problems = []
    for module in sorted(graph):
        level = layer_of(module, layers)
        if level < 0:
            problems.append(f"{module} is in no layer")
            continue
        for target in sorted(graph[module]):
            up = layer_of(target, layers)
            if up > level:
                problems.append(f"{module} ({layers[level][0]}) -> {target} ({layers[up][0]})")
    return problems


def test_no_import_runs_upward():
    assert upward_imports(import_graph(ROOT / "nxgates", "nxgates"), LAYERS) == []


def test_the_core_imports_only_the_core_and_the_leaves():
    graph = import_graph(ROOT / "nxgates", "nxgates")
    core = {m: targets for m, targets in graph.items() if layer_of(m, LAYERS) == 1}
    assert "nxgates.core.tape" in core  # the walker sees the core
    assert all(layer_of(t, LAYERS) <= 1 for targets in core.values() for t in targets)


def test_a_planted_upward_import_is_found_and_named(tmp_path):
    layers = [("leaves", ("pkg", "pkg.errors")), ("core", ("pkg.core",)), ("gates", ("pkg.gates",))]
    write(tmp_path / "pkg", {"__init__.py": "", "errors.py": "", "core/__init__.py": "",
                             "core/tape.py": "from pkg.errors import x\n\ndef f():\n    from pkg.gates import lora\n",
                             "gates/__init__.py": "", "gates/lora.py": "from pkg.core import tape\n"})
    assert upward_imports(import_graph(tmp_path / "pkg", "pkg"), layers) == [
        "pkg.core.tape (core) -> pkg.gates.lora (gates)"]


def test_a_module_in_no_layer_is_named(tmp_path):
    write(tmp_path / "pkg", {"__init__.py": "", "stray.py": ""})
    assert upward_imports(import_graph(tmp_path / "pkg", "pkg"), [("leaves", ("pkg.errors",))]) == [
        "pkg is in no layer", "pkg.stray is in no layer"]


def module_map() -> list[str]:
    """The paths the module map of docs/design.md names, as dotted module names."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = text.split("<!-- module-map -->\n")[1]
    paths = re.findall(r"^\| `(nxgates/[^`]*)` \|", table, flags=re.M)
    return [p.removesuffix("/").removesuffix(".py").replace("/", ".") for p in paths]


@pytest.mark.parametrize("module", module_map())
def test_every_module_of_the_design_map_is_in_a_layer(module):
    assert layer_of(module, LAYERS) >= 0, f"docs/design.md names {module}, which no layer of LAYERS holds"


def test_the_design_map_lists_the_layers_in_the_tables_order():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    named = re.findall(r"^\d+\. \*\*([^*]+)\*\*", text.split("<!-- layers -->\n")[1], flags=re.M)
    assert named == [name for name, _ in LAYERS]


def test_every_package_of_nxgates_is_in_the_design_map():
    mapped = module_map()
    packages = sorted({".".join(p.relative_to(ROOT).parts[:2]).removesuffix(".py")
                       for p in (ROOT / "nxgates").glob("*") if p.suffix == ".py" or (p / "__init__.py").exists()})
    missing = [m for m in packages if m not in ("nxgates.__init__", "nxgates.__main__")
               and not any(m == x or x.startswith(m + ".") for x in mapped)]
    assert missing == []
