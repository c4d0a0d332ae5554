"""Print the mutation score of each mutated file after ``mutmut run``; exit 1 if one is below the target.

Score = detected / (mutants - equivalent). A mutant is detected when a test failed on it (mutmut's
"killed"), or it hung or crashed the tests ("timeout", "segfault"). A surviving mutant is equivalent (no
behaviour change) when an entry of ``tools/mutation/equivalents.toml`` describes its change: the same file,
function, original line and mutated line (stripped). Entries name lines, not mutmut's numbers, which change
whenever a function is edited. An entry no survivor matches is reported as stale; a survivor no entry
matches counts as not killed. Run from the repository root: ``make mutation`` (docs/mutation.md).
"""

from __future__ import annotations

import ast
import difflib
import json
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

TARGET = 0.85
DETECTED = {1, 3, -24, 24, 152, 255, 36, -11, -9}  # mutmut's exit codes for killed / timeout / segfault
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", None: "not checked"}
EQUIVALENTS = Path("tools/mutation/equivalents.toml")
CLASS_MARK = "ǁ"  # mutmut names a method's mutants xǁClassǁmethod__mutmut_N


class Change(NamedTuple):
    """What one mutant changes: the lines of one function before and after, each stripped."""

    file: str
    function: str
    original: str
    mutated: str


class Equivalent(NamedTuple):
    """A change that alters no behaviour, and why."""

    change: Change
    reason: str


def mutated_files(root: Path) -> list[str]:
    """The files ``[tool.mutmut] only_mutate`` names, its glob patterns expanded."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    files: list[str] = []
    for pattern in config["only_mutate"]:
        matches = sorted(p.relative_to(root).as_posix() for p in root.glob(pattern))
        files += [m for m in matches if m not in files]
    return files


def load_equivalents(path: Path) -> list[Equivalent]:
    if not path.exists():
        return []
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    return [Equivalent(Change(e["file"], e["function"], e["original"].strip(), e["mutated"].strip()), e["reason"])
            for e in entries]


def load_results(root: Path, path: str) -> dict[str, int | None]:
    meta = root / "mutants" / (path + ".meta")
    if not meta.exists():
        raise SystemExit(f"mutation score: no results for {path} ({meta} is missing): run `make mutation`")
    return json.loads(meta.read_text())["exit_code_by_key"]


def function_name(key: str) -> str:
    """``pkg.mod.x_name__mutmut_3`` -> ``name``; ``pkg.mod.xǁClassǁname__mutmut_3`` -> ``Class.name``."""
    mangled = key.rpartition(".")[2].rpartition("__mutmut_")[0]
    if mangled.startswith("x" + CLASS_MARK):
        return ".".join(mangled[2:].split(CLASS_MARK))
    return mangled[2:]


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's functions and methods by name: where mutmut writes each mutant as its own function."""
    found = {}
    for node in tree.body:
        for member in node.body if isinstance(node, ast.ClassDef) else [node]:
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                found[member.name] = member
    return found


class MutantSources:
    """The functions of mutmut's mutated copy of a file (``mutants/<path>``), parsed once."""

    def __init__(self, root: Path, path: str):
        self.path = path
        source = (root / "mutants" / path).read_text()
        self.lines = source.splitlines()
        self.functions = _functions(ast.parse(source))

    def _text(self, name: str) -> list[str]:
        """The function's lines, stripped, its own name left out (the original and the mutant differ in it)."""
        node = self.functions[name]
        body = self.lines[node.lineno - 1 : node.end_lineno]
        return [line.strip() for line in [body[0].replace(name, "f", 1), *body[1:]]]

    def change(self, key: str) -> Change:
        """The lines a mutant changes, as ``mutmut show`` prints them: its function against the original."""
        generated = key.rpartition(".")[2]
        original = generated.rpartition("__mutmut_")[0] + "__mutmut_orig"
        removed, added = [], []
        for line in difflib.unified_diff(self._text(original), self._text(generated), lineterm="", n=0):
            if line.startswith(("---", "+++", "@@")):
                continue
            (removed if line.startswith("-") else added).append(line[1:])
        return Change(self.path, function_name(key), "\n".join(removed), "\n".join(added))


def main(root: Path = Path(".")) -> int:
    equivalents = load_equivalents(root / EQUIVALENTS)
    used: set[Equivalent] = set()
    files = mutated_files(root)
    below = []
    width = max(len(path) for path in files)
    unchecked_in_all = 0
    print(f"{'file':<{width}} {'killed':>7} / {'total':>5}  {'equiv':>5}  {'score':>6}  {'unchecked':>9}")
    for path in files:
        results = load_results(root, path)
        if not results:  # nothing to mutate (a package's __init__ of imports)
            continue
        survivors = sorted(k for k, code in results.items() if code not in DETECTED)
        sources = MutantSources(root, path) if survivors else None
        named, unexplained = set(), []
        for key in survivors:
            change = sources.change(key)
            matches = [e for e in equivalents if e.change == change]
            if matches:
                named.add(key)
                used.update(matches)
            else:
                unexplained.append((key, change))
        counted = len(results) - len(named)
        killed = counted - len(unexplained)
        score = killed / counted if counted else 1.0
        unchecked = sum(results[key] is None for key, _ in unexplained)
        unchecked_in_all += unchecked
        print(f"{path:<{width}} {killed:>7} / {counted:>5}  {len(named):>5}  {score:>6.1%}  {unchecked:>9}")
        for key, change in unexplained:
            if results[key] is None:  # counted above; listing thousands of them would hide the real survivors
                continue
            print(f"    {SURVIVED.get(results[key], f'exit {results[key]}')}: {key} in {change.function}  "
                  f"(mutmut show {key})\n        - {change.original}\n        + {change.mutated}")
        if score < TARGET:
            below.append(path)
    for entry in equivalents:
        if entry not in used:
            c = entry.change
            print(f"    stale equivalent, no survivor matches it: {c.file} {c.function}: "
                  f"{c.original!r} -> {c.mutated!r}")
    if unchecked_in_all:
        print(f"{unchecked_in_all} mutant(s) not checked: the run is incomplete (`make mutation` continues it)")
    if below:
        print(f"mutation score below {TARGET:.0%}: {', '.join(below)}")
        return 1
    print(f"every file at or above {TARGET:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
