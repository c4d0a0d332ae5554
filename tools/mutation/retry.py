"""Mark the surviving mutants of an earlier ``mutmut run`` as not checked, so the next run tries them again.

mutmut keeps every result it has, and re-tests a mutant only when its function changed. A test added since the
last run would never be tried on the mutants it kills; a run interrupted half way would start again from nothing
if ``mutants/`` were removed. ``make mutation`` therefore keeps ``mutants/``, clears the survivors' results here,
and lets mutmut try them (and every mutant never checked) with the tests as they are now. Killed mutants stay
killed: a test that failed on a mutant still fails on it unless the test itself was weakened.

mutmut's map of which test calls which function (``mutants/mutmut-stats.json``) is dropped too, so the run
collects it again (a minute or two). mutmut adds only tests it has not seen to that map: an old test that
now calls a new or renamed function would not be run on that function's mutants, and they would read as
survivors.

A mutant that ``tools/mutation/equivalents.toml`` names is marked skipped instead: its entry says why no test can
fail on it, and running it would only spend the whole time of every test that calls its function (a minute or
more for the tape's). The score counts it as named whatever its result; an entry that stops matching its mutant
(the function was edited) no longer skips it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from score import DETECTED, EQUIVALENTS, MutantSources, load_equivalents

SKIPPED = 34  # mutmut's exit code for a mutant it need not run
#: mutmut's map of which test calls which function, collected again when it is missing
STATS = "mutmut-stats.json"


def clear_survivors(mutants: Path) -> int:
    """Set every undetected result under ``mutants`` to not checked; the number of survivors among them.

    Skipped mutants are cleared too, and skipped again by ``skip_named_equivalents`` only if still named.
    """
    cleared = 0
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        survivors = [key for key, code in codes.items() if code is not None and code not in DETECTED]
        survivor_codes = [codes[key] for key in survivors]
        for key in survivors:
            codes[key] = None
        if survivors:
            meta.write_text(json.dumps(data, indent=4))
            cleared += sum(code != SKIPPED for code in survivor_codes)
    return cleared


def skip_named_equivalents(root: Path) -> int:
    """Mark each unchecked mutant that an equivalents entry describes as skipped; the number marked."""
    changes = {entry.change for entry in load_equivalents(root / EQUIVALENTS)}
    skipped = 0
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        path = meta.relative_to(root / "mutants").as_posix().removesuffix(".meta")
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        unchecked = [key for key, code in codes.items() if code is None]
        if not unchecked or not (root / "mutants" / path).exists():
            continue
        sources = MutantSources(root, path)
        named = [key for key in unchecked if _change(sources, key) in changes]
        for key in named:
            codes[key] = SKIPPED
        if named:
            meta.write_text(json.dumps(data, indent=4))
            skipped += len(named)
    return skipped


def _change(sources: MutantSources, key: str):
    """The mutant's change, or None when the mutated copy no longer has its function (mutmut regenerates it)."""
    try:
        return sources.change(key)
    except KeyError:
        return None


def main(root: Path = Path(".")) -> int:
    mutants = root / "mutants"
    if not mutants.is_dir():
        print("mutation: no earlier run in mutants/; every mutant will be tried")
        return 0
    print(f"mutation: {clear_survivors(mutants)} surviving mutant(s) of the earlier run will be tried again")
    (mutants / STATS).unlink(missing_ok=True)
    print("mutation: which test calls which function is collected again")
    print(f"mutation: {skip_named_equivalents(root)} mutant(s) named in {EQUIVALENTS} are skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
