"""Hand-edited baseline files and JSON reports: a document nxgates can compare with is compared (exit 0 or 1),
anything else is one line naming the file and what is wrong (exit 2). Never a traceback, never exit 3.

The documents are mutations of what ``nxgates run lora --update-baseline`` and ``--json`` write: a value
anywhere replaced by any JSON, a key removed, a figure swapped for another (a scalar for a record and back),
a record's field changed, lists and tables nested far deeper than any parser's stack.
"""

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates.baseline import store
from nxgates.baseline.compare import figure_lines
from nxgates.baseline.reports import diff_reports, load_report
from nxgates.cli import cli
from nxgates.errors import NxError

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FLAG = "--baseline"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Any]:
    """A real lora run's baseline document and JSON report, and the directory to run the CLI in."""
    where = tmp_path_factory.mktemp("made")
    with _in(where):
        r = CliRunner().invoke(cli, ["run", "lora", "-q", "--update-baseline", "b.json", "--json", "r.json"],
                               catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return {"dir": where, "baseline": json.loads((where / "b.json").read_text()),
            "report": json.loads((where / "r.json").read_text())}


class _in:
    """Run in ``where`` (so the packaged gates.toml is the registry), then back."""

    def __init__(self, where: Path):
        self.where, self.back = where, None

    def __enter__(self):
        self.back = os.getcwd()
        os.chdir(self.where)

    def __exit__(self, *exc):
        os.chdir(self.back)


def cli_in(where: Path, *args: str):
    with _in(where):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def assert_clean_exit(r) -> None:
    """Exit 0 or 1 with a verdict, or 2 with one line on stderr: never an internal error or a traceback."""
    assert r.exit_code in (0, 1, 2), (r.exit_code, r.output)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if r.exit_code == 2:
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("nxgates: error: "), r.stderr


# ---- mutations ------------------------------------------------------------------------------------------

RECORD_KEYS = ["sha256", "shape", "dtype", "values", "block", "blocks", "x"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(RECORD_KEYS) | st.text(max_size=3),
                                                                inner, max_size=5),
    max_leaves=12)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in ``doc``: the keys and indices that lead to it."""
    found = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += paths(v, (*prefix, i))
    return found


def at(doc: Any, path: tuple) -> Any:
    for step in path:
        doc = doc[step]
    return doc


@st.composite
def mutated(draw, original: Any) -> Any:
    """``original`` with one to three places changed."""
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        places = paths(doc)
        path = draw(st.sampled_from(places))
        how = draw(st.sampled_from(["replace", "delete", "swap", "nest", "record"]))
        if how == "replace" or not path:
            new = draw(JSON)
        elif how == "delete":
            parent = at(doc, path[:-1])
            del parent[path[-1]]
            continue
        elif how == "swap":  # another place's value: a scalar for a record, a record for a scalar, ...
            new = copy.deepcopy(at(doc, draw(st.sampled_from(places))))
        elif how == "nest":  # a marker: dumped() writes the nesting (deeper than Python's stack allows here)
            new = f"{NEST}{draw(st.sampled_from([2, 62, 63, 64, 65, 500, 5000, 100_000]))}"
        else:  # one field of a real record, changed
            record = copy.deepcopy(at(original, next(p for p in paths(original) if p and p[-1] == "A_analytic")))
            record[draw(st.sampled_from(RECORD_KEYS))] = draw(JSON)
            new = record
        if not path:
            doc = new
        else:
            at(doc, path[:-1])[path[-1]] = new
    return doc


NEST = "nest-lists-deep:"


def dumped(doc: Any) -> str:
    """``doc`` as JSON text, each nesting marker written as lists that many levels deep."""
    return re.sub(f'"{NEST}(\\d+)"', lambda m: "[" * int(m[1]) + "]" * int(m[1]), json.dumps(doc))


def parsed_or_refused(text: str, path: str) -> dict | None:
    try:
        return store.parse(text, path, FLAG)
    except NxError as exc:
        assert str(exc).startswith(f"{FLAG} {path}: ") and "\n" not in str(exc)
        return None


# ---- baseline files -------------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_a_mutated_baseline_is_compared_or_refused_by_the_loader(made, data):
    doc = data.draw(mutated(made["baseline"]))
    loaded = parsed_or_refused(dumped(doc), "b.json")
    if loaded is None:
        return
    fresh = next(iter(made["baseline"]["entries"].values()))["fingerprints"]
    for entry in loaded["entries"].values():  # what --baseline compares: each line names a figure
        for line in figure_lines("lora", entry.get("fingerprints", {}), fresh):
            assert line.startswith("lora ") and line.split(": ", 1)[1]


@FUZZ
@given(data=st.data())
def test_a_mutated_baseline_through_the_cli_is_exit_0_1_or_2(made, data):
    doc = data.draw(mutated(made["baseline"]))
    (made["dir"] / "m.json").write_text(dumped(doc))
    assert_clean_exit(cli_in(made["dir"], "run", "lora", "-q", "--baseline", "m.json"))


def edited(made, edit) -> str:
    """The real baseline with ``edit(entry_fingerprints, doc)`` applied, written as m.json; its path."""
    doc = copy.deepcopy(made["baseline"])
    edit(next(iter(doc["entries"].values()))["fingerprints"], doc)
    (made["dir"] / "m.json").write_text(json.dumps(doc))
    return "m.json"


@pytest.mark.parametrize("edit, message", [
    (lambda f, d: d["entries"].update({k: {**v, "fingerprints": [1]} for k, v in d["entries"].items()}),
     "fingerprints is a list, not a table of figures"),
    (lambda f, d: d["entries"].update({k: 7 for k in d["entries"]}), "a number, not a table"),
    (lambda f, d: f["A_analytic"]["values"].pop(), "figure A_analytic: values hold 11 cells, shape [6, 2] has 12"),
    (lambda f, d: f["A_analytic"].update(shape=[6, -2]),
     "figure A_analytic: shape [6, -2] is not a list of lengths (integers >= 0)"),
    (lambda f, d: f["A_analytic"].update(shape=[True, 2]), "figure A_analytic: shape [True, 2] is not a list"),
    (lambda f, d: f["A_analytic"].update(sha256=7), "figure A_analytic: sha256 7 is not text"),
    (lambda f, d: f["A_analytic"]["blocks"].pop(), "figure A_analytic: 11 blocks of 1 cells do not cover shape"),
    (lambda f, d: f["A_analytic"].update(block=0), "figure A_analytic: block 0 is not a positive integer"),
    (lambda f, d: f.update(loss_q=None), "figure loss_q: null: neither a value"),
    (lambda f, d: f.update(loss_q=[1, 2]), "figure loss_q: a list: neither a value"),
    (lambda f, d: f.update(loss_q={"a": 1}), "figure loss_q: a table without sha256 and shape"),
    (lambda f, d: d.update(format=True), "baseline format True, this nxgates reads format 1"),
])
def test_each_hand_edit_is_one_line_naming_the_file_and_what_is_wrong(made, edit, message):
    path = edited(made, edit)
    r = cli_in(made["dir"], "run", "lora", "-q", "--baseline", path)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("nxgates: error: --baseline m.json: ") and len(r.stderr.splitlines()) == 1
    assert message in r.stderr, r.stderr


@pytest.mark.parametrize("text", ["[1, 2]", '"entries"', "null", '{"format": 1, "entries": []}'])
def test_a_top_level_that_is_not_a_table_of_entries_is_refused(made, text):
    (made["dir"] / "m.json").write_text(text)
    r = cli_in(made["dir"], "run", "lora", "-q", "--baseline", "m.json")
    assert r.exit_code == 2 and "--baseline m.json: not a baseline file (no entries table)" in r.stderr


@pytest.mark.parametrize("depth", [65, 100_000])
def test_nesting_deeper_than_any_baseline_is_refused(made, depth):
    (made["dir"] / "m.json").write_text('{"format": 1, "entries": {"k": ' + "[" * depth + "]" * depth + "}}")
    r = cli_in(made["dir"], "run", "lora", "-q", "--baseline", "m.json")
    assert r.exit_code == 2, r.output
    assert "--baseline m.json: not a baseline file (JSON nested more than 64 levels deep)" in r.stderr


def test_a_scalar_swapped_for_a_record_and_back_is_a_moved_figure(made):
    def swap(f, d):
        f["loss_q"], f["A_analytic"] = f["A_analytic"], f["loss_q"]

    r = cli_in(made["dir"], "run", "lora", "-q", "--baseline", edited(made, swap))
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == " FAIL baseline -- 2 of 9 figures moved since m.json:"
    assert lines[1].startswith("lora[T=3 DM=6 R=2] loss_q: <i8 (6, 2) sha256 ") and lines[1].endswith(
        " -> 1329684529960")
    assert lines[2].startswith("lora[T=3 DM=6 R=2] A_analytic: 1329684529960 -> <i8 (6, 2) sha256 ")


def test_a_moved_digest_alone_is_said_to_be_the_digest(made):
    r = cli_in(made["dir"], "run", "lora", "-q", "--baseline",
               edited(made, lambda f, d: f["A_analytic"].update(sha256="0" * 64)))
    assert r.exit_code == 1, r.output
    line = r.stdout.splitlines()[1]
    digest = made["baseline"]["entries"]
    real = next(iter(digest.values()))["fingerprints"]["A_analytic"]["sha256"][:16]
    assert line == (f"lora[T=3 DM=6 R=2] A_analytic: sha256 0000000000000000 -> {real} (the digest alone moved: "
                    "every cell kept is as before)")


def test_a_moved_digest_alone_of_an_array_kept_as_blocks_is_said_to_be_the_digest():
    from nxgates.baseline.cells import cell_fingerprint

    new = cell_fingerprint(list(range(1000)))
    assert "values" not in new
    old = {**new, "sha256": "f" * 64}
    (line,) = figure_lines("g", {"big": old}, {"big": new})
    assert line == f"g big: sha256 ffffffffffffffff -> {new['sha256'][:16]} (the digest alone moved: every cell " \
                   "kept is as before)"


# ---- JSON reports: nxgates diff -------------------------------------------------------------------------


def report_or_refused(made, doc: Any) -> dict | None:
    path = made["dir"] / "m.json"
    path.write_text(dumped(doc))
    try:
        return load_report(str(path))
    except NxError as exc:
        assert str(exc).startswith(f"diff {path}: ") and "\n" not in str(exc)
        return None


@FUZZ
@given(data=st.data())
def test_a_mutated_report_is_compared_or_refused_by_the_loader(made, data):
    loaded = report_or_refused(made, data.draw(mutated(made["report"])))
    if loaded is None:
        return
    try:
        result = diff_reports(made["report"], loaded, "r.json", "m.json")
    except NxError as exc:
        assert "no gate run in common" in str(exc)
        return
    assert result.gates >= 1 and all(isinstance(line, str) for line in result.figures)


@FUZZ
@given(data=st.data())
def test_a_mutated_report_through_diff_is_exit_0_1_or_2(made, data):
    (made["dir"] / "m.json").write_text(dumped(data.draw(mutated(made["report"]))))
    assert_clean_exit(cli_in(made["dir"], "diff", "r.json", "m.json"))
    assert_clean_exit(cli_in(made["dir"], "diff", "m.json", "r.json"))


@pytest.mark.parametrize("edit, message", [
    (lambda g: g.update(fingerprints=[1]), "gate lora: fingerprints is a list, not a table of figures"),
    (lambda g: g.update(metrics=[1]), "gate lora: metrics is a list, not a table"),
    (lambda g: g.update(label=3), "gate lora: label is a number, not text"),
    (lambda g: g["fingerprints"]["A_analytic"]["values"].append(1),
     "gate lora: figure A_analytic: values hold 13 cells, shape [6, 2] has 12"),
])
def test_a_hand_edited_report_is_one_line_naming_the_file(made, edit, message):
    doc = copy.deepcopy(made["report"])
    edit(doc["gates"][0])
    (made["dir"] / "m.json").write_text(json.dumps(doc))
    r = cli_in(made["dir"], "diff", "r.json", "m.json")
    assert r.exit_code == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.output
    assert f"diff m.json: {message}" in r.stderr, r.stderr


def test_a_report_nested_beyond_the_parser_is_refused(made):
    (made["dir"] / "m.json").write_text('{"gates": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = cli_in(made["dir"], "diff", "r.json", "m.json")
    assert r.exit_code == 2
    assert "diff m.json: not an nxgates JSON report (JSON nested more than 64 levels deep)" in r.stderr
