"""Print the mutation score of each mutated file after ``mutmut run``; exit 1 if one is below the target.

Score = detected / (mutants - equivalent). A mutant is detected when a test failed on it (mutmut's
"killed"), or it hung or crashed the tests ("timeout", "segfault"). Equivalent mutants (no behaviour
change) are those named in ``tests/MUTANTS.md`` with a reason; a named mutant that is in fact killed is
reported as a stale entry, not excluded. Run from the repository root: ``make mutation``.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

TARGET = 0.85
DETECTED = {1, 3, -24, 24, 152, 255, 36, -11, -9}  # mutmut's exit codes for killed / timeout / segfault
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests", None: "not checked"}
MUTANT_NAME = re.compile(r"`(nxgates\.[^`\s]*__mutmut_\d+)`")


def mutated_files(root: Path) -> list[str]:
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(config["only_mutate"])


def equivalent_mutants(root: Path) -> set[str]:
    notes = root / "tests" / "MUTANTS.md"
    return set(MUTANT_NAME.findall(notes.read_text())) if notes.exists() else set()


def load_results(root: Path, path: str) -> dict[str, int | None]:
    meta = root / "mutants" / (path + ".meta")
    if not meta.exists():
        raise SystemExit(f"mutation_score: no results for {path} ({meta} is missing): run `make mutation`")
    return json.loads(meta.read_text())["exit_code_by_key"]


def main(root: Path = Path(".")) -> int:
    equivalent = equivalent_mutants(root)
    seen: set[str] = set()
    below = []
    print(f"{'file':<28} {'killed':>7} / {'total':>5}  {'equiv':>5}  {'score':>6}")
    for path in mutated_files(root):
        results = load_results(root, path)
        seen |= results.keys()
        named = {k for k in results if k in equivalent and results[k] not in DETECTED}
        stale = sorted(k for k in results if k in equivalent and results[k] in DETECTED)
        counted = {k: v for k, v in results.items() if k not in named}
        killed = sum(v in DETECTED for v in counted.values())
        score = killed / len(counted) if counted else 1.0
        print(f"{path:<28} {killed:>7} / {len(counted):>5}  {len(named):>5}  {score:>6.1%}")
        for key, code in sorted(counted.items()):
            if code not in DETECTED:
                print(f"    {SURVIVED.get(code, f'exit {code}')}: {key}  (mutmut show {key})")
        for key in stale:
            print(f"    stale MUTANTS.md entry, killed now: {key}")
        if score < TARGET:
            below.append(path)
    for key in sorted(equivalent - seen):
        print(f"    MUTANTS.md names an unknown mutant: {key}")
    if below:
        print(f"mutation score below {TARGET:.0%}: {', '.join(below)}")
        return 1
    print(f"every file at or above {TARGET:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
