"""tools/mutation/retry.py: the survivors of an earlier run (and only they) are tried again by the next one."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).parents[2] / "tools" / "mutation"
SKIPPED_BY_RETRY = 34  # mutmut's exit code for a mutant it need not run


@pytest.fixture(scope="module")
def retry():
    sys.path.insert(0, str(TOOLS))
    try:
        spec = importlib.util.spec_from_file_location("mutation_retry", TOOLS / "retry.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(TOOLS))


def meta(path: Path, codes: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": {"f": "abc"},
                                "durations_by_key": {}, "estimated_durations_by_key": {}}))
    return path


def test_survivors_are_cleared_and_every_other_result_kept(retry, tmp_path):
    m = meta(tmp_path / "mutants" / "pkg" / "m.py.meta",
             {"k_killed": 1, "k_timeout": 36, "k_survived": 0, "k_no_tests": 33, "k_unchecked": None})
    assert retry.clear_survivors(tmp_path / "mutants") == 2
    data = json.loads(m.read_text())
    assert data["exit_code_by_key"] == {"k_killed": 1, "k_timeout": 36, "k_survived": None, "k_no_tests": None,
                                        "k_unchecked": None}
    assert data["hash_by_function_name"] == {"f": "abc"}  # mutmut's other records are untouched


def test_a_run_with_nothing_to_retry_rewrites_nothing(retry, tmp_path):
    m = meta(tmp_path / "mutants" / "pkg" / "m.py.meta", {"k_killed": 1})
    before = m.read_text()
    assert retry.clear_survivors(tmp_path / "mutants") == 0
    assert m.read_text() == before


def test_without_an_earlier_run_it_says_so(retry, tmp_path, capsys):
    assert retry.main(tmp_path) == 0
    assert "no earlier run" in capsys.readouterr().out


MUTATED = '''\
def x_f__mutmut_orig(a):
    return sorted(a, key=None)


def x_f__mutmut_1(a):
    return sorted(a, )


def x_f__mutmut_2(a):
    return sorted(a, key=len)
'''

EQUIVALENT = '''
[[equivalent]]
file = "pkg/m.py"
function = "f"
original = "return sorted(a, key=None)"
mutated = "return sorted(a, )"
reason = "key=None is sorted's default"
'''


def project(root: Path, codes: dict) -> Path:
    (root / "mutants" / "pkg").mkdir(parents=True)
    (root / "mutants" / "pkg" / "m.py").write_text(MUTATED)
    (root / "tools" / "mutation").mkdir(parents=True)
    (root / "tools" / "mutation" / "equivalents.toml").write_text(EQUIVALENT)
    return meta(root / "mutants" / "pkg" / "m.py.meta", codes)


def test_a_named_equivalent_is_skipped_and_an_unnamed_mutant_is_still_run(retry, tmp_path):
    m = project(tmp_path, {"pkg.m.x_f__mutmut_1": None, "pkg.m.x_f__mutmut_2": None})
    assert retry.skip_named_equivalents(tmp_path) == 1
    assert json.loads(m.read_text())["exit_code_by_key"] == {"pkg.m.x_f__mutmut_1": retry.SKIPPED,
                                                             "pkg.m.x_f__mutmut_2": None}


def test_a_mutant_with_a_result_is_not_skipped_even_when_named(retry, tmp_path):
    m = project(tmp_path, {"pkg.m.x_f__mutmut_1": 1, "pkg.m.x_f__mutmut_2": None})
    assert retry.skip_named_equivalents(tmp_path) == 0
    assert json.loads(m.read_text())["exit_code_by_key"]["pkg.m.x_f__mutmut_1"] == 1


def test_main_retries_survivors_then_skips_the_named_ones(retry, tmp_path, capsys):
    m = project(tmp_path, {"pkg.m.x_f__mutmut_1": 0, "pkg.m.x_f__mutmut_2": 0})
    assert retry.main(tmp_path) == 0
    assert json.loads(m.read_text())["exit_code_by_key"] == {"pkg.m.x_f__mutmut_1": retry.SKIPPED,
                                                             "pkg.m.x_f__mutmut_2": None}
    out = capsys.readouterr().out
    assert "2 surviving mutant(s)" in out and "1 mutant(s) named" in out


def test_main_drops_the_map_of_which_test_calls_which_function(retry, tmp_path, capsys):
    project(tmp_path, {"pkg.m.x_f__mutmut_1": 1})
    stats = tmp_path / "mutants" / retry.STATS
    stats.write_text('{"tests_by_mangled_function_name": {}}')
    kept = tmp_path / "mutants" / "pkg" / "m.py.meta"
    assert retry.main(tmp_path) == 0
    assert not stats.exists() and kept.exists()
    assert "collected again" in capsys.readouterr().out


def test_a_skipped_mutant_is_cleared_but_not_counted_as_a_survivor(retry, tmp_path):
    m = meta(tmp_path / "mutants" / "pkg" / "m.py.meta", {"k_skipped": retry.SKIPPED, "k_survived": 0})
    assert retry.clear_survivors(tmp_path / "mutants") == 1
    assert json.loads(m.read_text())["exit_code_by_key"] == {"k_skipped": None, "k_survived": None}
