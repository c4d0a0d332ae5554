"""tools/mutation/score.py on a tiny fake mutmut result: a survivor is excused only by an equivalents entry
describing its very change; an entry no survivor matches is stale; any other survivor lowers the score."""

import importlib.util
import json
from pathlib import Path

import pytest

SCORE = Path(__file__).parents[2] / "tools" / "mutation" / "score.py"


@pytest.fixture(scope="module")
def score():
    spec = importlib.util.spec_from_file_location("mutation_score", SCORE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MUTATED = '''\
def x_f__mutmut_orig(a):
    b = a * 3
    return b + 1


def x_f__mutmut_1(a):
    b = a * 3
    return b - 1


def x_f__mutmut_2(a):
    b = a * 4
    return b + 1


class C:
    def xǁCǁg__mutmut_orig(self):
        return sorted(self.items, key=None)

    def xǁCǁg__mutmut_1(self):
        return sorted(self.items, )
'''

G_EQUIVALENT = '''
[[equivalent]]
file = "pkg/m.py"
function = "C.g"
original = "return sorted(self.items, key=None)"
mutated = "return sorted(self.items, )"
reason = "key=None is sorted's default"
'''

F_EQUIVALENT = '''
[[equivalent]]
file = "pkg/m.py"
function = "f"
original = "b = a * 3"
mutated = "b = a * 4"
reason = "(pretend) b is only ever compared with 0"
'''

STALE = '''
[[equivalent]]
file = "pkg/m.py"
function = "f"
original = "return b + 1"
mutated = "return b * 1"
reason = "a mutant this run does not have"
'''


def fake_run(root: Path, equivalents: str, codes: dict[str, int]) -> Path:
    """A repository after ``mutmut run``: the config, the source, mutmut's mutated copy and its results."""
    (root / "pyproject.toml").write_text('[tool.mutmut]\nonly_mutate = ["pkg/*.py"]\n')
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text("# the original source; the score reads only mutmut's copy\n")
    (root / "mutants" / "pkg").mkdir(parents=True)
    (root / "mutants" / "pkg" / "m.py").write_text(MUTATED)
    (root / "mutants" / "pkg" / "m.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    (root / "tools" / "mutation").mkdir(parents=True)
    (root / "tools" / "mutation" / "equivalents.toml").write_text(equivalents)
    return root


KILLED, SURVIVED = 1, 0
CODES = {"pkg.m.x_f__mutmut_1": KILLED, "pkg.m.x_f__mutmut_2": SURVIVED, "pkg.m.xǁCǁg__mutmut_1": SURVIVED}


def test_a_survivor_matched_by_its_change_is_excused(score, tmp_path, capsys):
    root = fake_run(tmp_path, G_EQUIVALENT + F_EQUIVALENT, CODES)
    assert score.main(root) == 0
    out = capsys.readouterr().out
    assert "pkg/m.py" in out and "1 /     1      2  100.0%" in out
    assert "survived" not in out and "stale" not in out


def test_a_survivor_no_entry_matches_counts_as_not_killed(score, tmp_path, capsys):
    root = fake_run(tmp_path, G_EQUIVALENT, CODES)
    assert score.main(root) == 1
    out = capsys.readouterr().out
    assert "1 /     2      1   50.0%" in out
    assert "survived: pkg.m.x_f__mutmut_2 in f" in out and "- b = a * 3" in out and "+ b = a * 4" in out
    assert "mutation score below 85%: pkg/m.py" in out


def test_an_entry_that_matches_no_survivor_is_reported_stale_and_excuses_nothing(score, tmp_path, capsys):
    root = fake_run(tmp_path, G_EQUIVALENT + STALE, CODES)
    assert score.main(root) == 1
    out = capsys.readouterr().out
    assert "stale equivalent, no survivor matches it: pkg/m.py f: 'return b + 1' -> 'return b * 1'" in out
    assert "survived: pkg.m.x_f__mutmut_2" in out


def test_an_entry_for_a_killed_mutant_is_stale(score, tmp_path, capsys):
    codes = {**CODES, "pkg.m.x_f__mutmut_2": KILLED}
    root = fake_run(tmp_path, G_EQUIVALENT + F_EQUIVALENT, codes)
    assert score.main(root) == 0
    assert "stale equivalent, no survivor matches it: pkg/m.py f: 'b = a * 3' -> 'b = a * 4'" in capsys.readouterr().out


def test_the_same_line_in_another_function_does_not_match(score, tmp_path, capsys):
    root = fake_run(tmp_path, G_EQUIVALENT + F_EQUIVALENT.replace('function = "f"', 'function = "C.g"'), CODES)
    assert score.main(root) == 1
    assert "survived: pkg.m.x_f__mutmut_2" in capsys.readouterr().out


def test_a_missing_run_says_how_to_make_one(score, tmp_path):
    root = fake_run(tmp_path, "", CODES)
    (root / "mutants" / "pkg" / "m.py.meta").unlink()
    with pytest.raises(SystemExit, match="run `make mutation`"):
        score.main(root)


def test_names_and_changes_read_as_mutmut_show_prints_them(score, tmp_path):
    assert score.function_name("nxgates.core.q20.x_tdiv__mutmut_8") == "tdiv"
    assert score.function_name("nxgates.core.tape.xǁTapeǁ__init____mutmut_40") == "Tape.__init__"
    root = fake_run(tmp_path, "", CODES)
    sources = score.MutantSources(root, "pkg/m.py")
    assert sources.change("pkg.m.xǁCǁg__mutmut_1") == score.Change(
        "pkg/m.py", "C.g", "return sorted(self.items, key=None)", "return sorted(self.items, )")


def test_the_repository_equivalents_file_parses_and_names_files_mutmut_mutates(score):
    root = SCORE.parents[2]
    entries = score.load_equivalents(root / score.EQUIVALENTS)
    assert entries and all(e.reason for e in entries)
    assert {e.change.file for e in entries} <= set(score.mutated_files(root))
    assert len({e.change for e in entries}) == len(entries)  # one entry, one reason per change


def test_a_file_with_nothing_to_mutate_is_left_out_of_the_table(score, tmp_path, capsys):
    root = fake_run(tmp_path, G_EQUIVALENT + F_EQUIVALENT, CODES)
    (root / "pkg" / "__init__.py").write_text("from pkg.m import f\n")
    (root / "mutants" / "pkg" / "__init__.py.meta").write_text(json.dumps({"exit_code_by_key": {}}))
    assert score.main(root) == 0
    out = capsys.readouterr().out
    assert "pkg/m.py" in out and "__init__" not in out


def test_mutants_not_checked_count_against_the_score_and_call_the_run_incomplete(score, tmp_path, capsys):
    codes = {**CODES, "pkg.m.x_f__mutmut_1": None}
    root = fake_run(tmp_path, G_EQUIVALENT + F_EQUIVALENT, codes)
    assert score.main(root) == 1
    out = capsys.readouterr().out
    assert "0 /     1      2    0.0%          1" in out
    assert "not checked: pkg.m.x_f__mutmut_1" not in out
    assert "1 mutant(s) not checked: the run is incomplete" in out
