"""Mark the surviving mutants of an earlier ``mutmut run`` as not checked, so the next run tries them again.

mutmut keeps every result it has, and re-tests a mutant only when its function changed. A test added since the
last run would never be tried on the mutants it kills; a run interrupted half way would start again from nothing
if ``mutants/`` were removed. ``make mutation`` therefore keeps ``mutants/``, clears the survivors' results here,
and lets mutmut try them (and every mutant never checked) with the tests as they are now. Killed mutants stay
killed: a test that failed on a mutant still fails on it unless the test itself was weakened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from score import DETECTED


def clear_survivors(mutants: Path) -> int:
    """Set every undetected result under ``mutants`` to not checked; the number cleared."""
    cleared = 0
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        survivors = [key for key, code in codes.items() if code is not None and code not in DETECTED]
        for key in survivors:
            codes[key] = None
        if survivors:
            meta.write_text(json.dumps(data, indent=4))
            cleared += len(survivors)
    return cleared


def main(root: Path = Path(".")) -> int:
    mutants = root / "mutants"
    if not mutants.is_dir():
        print("mutation: no earlier run in mutants/; every mutant will be tried")
        return 0
    print(f"mutation: {clear_survivors(mutants)} surviving mutant(s) of the earlier run will be tried again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
