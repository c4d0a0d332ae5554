"""tools/perf_table.py writes docs/performance.md whole from one bench.json: the committed document is what
the script makes of the committed copy of that JSON (docs/bench.json), a line typed into it by hand fails the
check, and on a fixture shaped like benchmarks/bench.py's output every figure shown is a field of the JSON,
named with its statistic."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "tools" / "perf_table.py"
FIXTURE = Path(__file__).parent / "data" / "bench.json"
LARGE = (256, 203_264)  # parallel-grad large: B, NP = H*D + O*H


@pytest.fixture(scope="module")
def perf_table():
    spec = importlib.util.spec_from_file_location("perf_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fixture_results() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def check(perf_table, doc: Path, bench: Path, capsys) -> tuple[int, str]:
    code = perf_table.main(["--check", "--doc", str(doc), "--bench", str(bench)], out=lambda _: None)
    return code, capsys.readouterr().err


# ---- the committed document ----------------------------------------------------------------------------------


def test_the_committed_performance_doc_is_what_its_bench_json_gives(perf_table, capsys):
    assert perf_table.SOURCE_JSON == ROOT / "docs" / "bench.json"
    assert perf_table.main(["--check"], out=lambda _: None) == 0, capsys.readouterr().err
    results = json.loads(perf_table.SOURCE_JSON.read_text(encoding="utf-8"))
    assert (ROOT / "docs" / "performance.md").read_text(encoding="utf-8") == perf_table.document(results)


def test_the_packaged_large_preset_gives_the_row_size_the_document_states(perf_table):
    assert perf_table.large_rows_bytes() == LARGE


@pytest.mark.parametrize("planted", [
    "The parallel pass takes 0.050 s at `large`.",  # a figure typed into the prose
    "",  # even an empty line: the document is the script's output, byte for byte
])
def test_a_line_typed_into_the_committed_document_fails_the_check(perf_table, tmp_path, capsys, planted):
    doc = tmp_path / "performance.md"
    lines = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("## Targets"))
    doc.write_text("".join([*lines[:at], planted + "\n", *lines[at:]]), encoding="utf-8")
    code, err = check(perf_table, doc, perf_table.SOURCE_JSON, capsys)
    assert code == 1
    assert f"line {at + 1}: {planted!r} where the JSON gives" in err and "run `make docs`" in err
    assert len(err.splitlines()) == 1


def test_a_figure_edited_in_a_generated_table_fails_the_check(perf_table, tmp_path, capsys):
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    doc = tmp_path / "performance.md"
    row = next(line for line in text.splitlines() if line.startswith("| large/process |"))
    doc.write_text(text.replace(row, row.replace(" s |", "1 s |", 1)), encoding="utf-8")
    code, err = check(perf_table, doc, perf_table.SOURCE_JSON, capsys)
    assert code == 1 and "large/process" in err


# ---- writing from a bench.json --------------------------------------------------------------------------------


@pytest.fixture
def repo(perf_table, tmp_path, monkeypatch):
    """perf_table writing into tmp_path/docs (the packaged gates.toml still read for the row size)."""
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(perf_table, "PERF_DOC", tmp_path / "docs" / "performance.md")
    monkeypatch.setattr(perf_table, "SOURCE_JSON", tmp_path / "docs" / "bench.json")
    return tmp_path


def test_make_docs_writes_the_whole_document_and_keeps_its_json(perf_table, repo, fixture_results, capsys):
    bench = repo / "bench-results" / "bench.json"
    bench.parent.mkdir()
    shutil.copy(FIXTURE, bench)
    (repo / "docs" / "performance.md").write_text("# Performance\n\nA line typed by hand.\n", encoding="utf-8")
    assert perf_table.main(["--bench", str(bench)], out=lambda _: None) == 0
    text = (repo / "docs" / "performance.md").read_text(encoding="utf-8")
    assert text == perf_table.document(fixture_results)
    assert "typed by hand.\n" not in text
    assert json.loads((repo / "docs" / "bench.json").read_text(encoding="utf-8")) == fixture_results
    assert perf_table.main(["--check"], out=lambda _: None) == 0, capsys.readouterr().err
    assert perf_table.main(["--bench", str(bench)], out=lambda _: None) == 0
    assert (repo / "docs" / "performance.md").read_text(encoding="utf-8") == text  # twice changes nothing


def test_check_refuses_a_missing_json_with_exit_2(perf_table, repo, capsys):
    assert perf_table.main(["--check"], out=lambda _: None) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "make bench" in err


def test_write_refuses_a_json_that_is_not_an_object_with_exit_2(perf_table, repo, capsys):
    bench = repo / "bench.json"
    bench.write_text("[1, 2]\n", encoding="utf-8")
    assert perf_table.main(["--bench", str(bench)], out=lambda _: None) == 2
    assert "not hold a JSON object" in capsys.readouterr().err
    assert not (repo / "docs" / "performance.md").exists()


# ---- what the document says, from the fixture ------------------------------------------------------------


def test_every_section_holds_the_fixtures_figures_with_their_statistic(perf_table, fixture_results):
    text = perf_table.document(fixture_results, LARGE)
    for line in [
        "2 CPUs, Python 3.11.9; two-core control 1.97x",
        "| lora large: fast gradcheck on 2 workers vs 1 >= 1.7x | 0.50x | **missed** |",
        "| large | 4096 | 0.007 s | 2.370 s | 334x |",
        "| large/process | 0.200 s | 0.100 s | 2.00x | 102 MiB + 79 MiB |",
        "| dp-train/large/thread | 1.100 s | yes |",
        "| **serial pass / row-writing floor** (target <= 3x) | 4.00x | median of ratios |",
        "| row-writing floor (ufunc buffer 256) | 0.0500 s | median of 5 rounds |",
        "| **the parallel pass's speed / JAX 0.4.1 `jit(vmap(grad))`'s** (target > 1x) | 1.25x | median of ratios; "
        "the rounds: 1.25, 1.25, 1.25, 1.25, 1.25 |",
        "| dp-train `large`, a step (process): serial, parallel | 0.140 s, 0.110 s | median of 3 runs |",
        "| lora `T=2048 DM=256 R=8`, 1 and 2 workers (no target) | 4.00 s on 1, 2.50 s on 2: 2 workers at 1.60x "
        "one worker's speed | medians of 3 runs, their quotient |",
        "| dask, one cluster for every run | 0.150 s | 0.200 s | - |",
        "0.330 s against `python -c \"import numpy, click, rich\"` 0.300 s (medians of 21 runs each), 1.10x "
        "(median of 21 paired runs' ratios).",
        "rows (256 x 203,264 float32, 208 MB at `large`)",
        "The timed passes take 0.40 s (serial + 2 x parallel",
        "the gate, in 5 runs of its own, 1.50x its own timed passes (median of the runs' ratios)",
        "0.125 s against the process executor's 0.100 s (medians of 5 runs), their quotient 1.25x, and 1.50x on a "
        "cluster that outlives the runs",
    ]:
        assert line in text, line
    assert text.count("<!-- perf-table -->\n") == 2
    assert "torch" not in text.split("## The tape's rows")[1].split("## Scale")[0].replace(
        "the JAX and torch peers", "")  # no peer measured: no row


def test_the_three_measurements_of_one_pass_are_each_named(perf_table, fixture_results):
    fixture_results["parallel-grad"]["large/process"]["parallel_seconds"] = 0.062
    fixture_results["dask"]["process"]["parallel_seconds"] = 0.054
    fixture_results["tape"]["parallel_seconds"] = 0.0555
    text = perf_table.document(fixture_results, LARGE)
    assert "measured 3 times in a run" in text
    assert "* 0.062 s in [the last run](#the-last-run)'s parallel-grad table: the median of 5 runs" in text
    assert "* 0.054 s in the [Dask](#dask) rows: the median of 5 runs in one child process with `workers=2`" in text
    assert "* 0.0555 s in [the tape's rows](#the-tapes-rows): the median of 5 rounds" in text


def test_a_measurement_the_json_lacks_is_left_out_not_invented(perf_table, fixture_results):
    for key in ("tape", "scale", "dask", "startup"):
        del fixture_results[key]
    del fixture_results["lora"]["large"]["fast_seconds"]
    text = perf_table.document(fixture_results, LARGE)
    for heading in ("## The tape's rows", "## Scale", "## Dask", "**Start-up.**", "measured 3 times",
                    "The timed passes take"):
        assert heading not in text
    assert "leaves the whole gate at `large` a few milliseconds in one process" in text
    assert "| large | 4096 | - | 2.370 s | 334x |" in text


def test_the_json_note_is_shown_as_the_source_of_the_figures(perf_table, fixture_results):
    fixture_results["note"] = "Rounded as printed."
    assert "**The source of these figures.** Rounded as printed.\n" in perf_table.document(fixture_results, LARGE)


def test_the_fixture_has_the_shape_bench_py_writes(fixture_results):
    assert set(fixture_results) == {"machine", "lora", "parallel-grad", "tape", "scale", "dask", "training",
                                    "startup", "targets"}
    source = (ROOT / "benchmarks" / "bench.py").read_text(encoding="utf-8")
    for key in fixture_results:
        assert f'"{key}"' in source  # every top-level key is one bench.py writes
    tape = (ROOT / "benchmarks" / "bench_tape.py").read_text(encoding="utf-8")
    for key in fixture_results["tape"]["floor"]:
        assert f'"{key}"' in tape
    assert '"speeds"' in tape
