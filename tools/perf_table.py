"""Write docs/performance.md, whole, from ``bench-results/bench.json`` (``make docs``).

``make bench`` writes the JSON; this script turns it into the document. The prose around the figures is
written here, and every figure is a field of the JSON, named with the statistic it is (a median of runs, a
median of ratios, one run), so the document says what one benchmark run measured, on the machine it ran on.
The script also keeps the JSON it read as ``docs/bench.json``, the source of the committed document:
``--check`` (run by tests/tools/test_perf_table.py) fails when docs/performance.md is not what this script
makes of that file, so a figure typed into the document by hand does not stay.

``--doc PATH`` instead fills only the block between the two ``<!-- perf-table -->`` lines of PATH with the
tables of the run.

Exit 0 when the document was written (or, with ``--check``, is what the JSON gives), 1 when ``--check``
finds it differs (the first differing line on stderr), 2 (one line on stderr) when the JSON, the document
or its markers are missing or unreadable.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_JSON = ROOT / "bench-results" / "bench.json"
#: the copy of the JSON the committed document was generated from
SOURCE_JSON = ROOT / "docs" / "bench.json"
PERF_DOC = ROOT / "docs" / "performance.md"
GATES_TOML = ROOT / "nxgates" / "gates.toml"
MARKER = "<!-- perf-table -->"
MiB = 1 << 20


class PerfTableError(Exception):
    """Input the script cannot use: reported as one line, exit 2."""


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f} s" if _num(value) else "-"


def _times(value: Any, digits: int = 2) -> str:
    return f"{value:.{digits}f}x" if _num(value) else "-"


def _mib(value: Any) -> str:
    return f"{value / MiB:.0f} MiB" if _num(value) else "-"


def _cell(text: Any) -> str:
    """A value as a table cell: pipes escaped so a figure never splits a row."""
    return str(text).replace("|", "\\|")


def _get(results: Any, *keys: str) -> Any:
    """``results[k1][k2]...``, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(results, dict):
            return None
        results = results.get(key)
    return results


# ---- the tables of the run (also what --doc fills in) ------------------------------------------------------


def _machine(results: dict[str, Any]) -> list[str]:
    machine = results.get("machine", {})
    control = machine.get("two_core_control")
    shown = f"{control:.2f}x" if _num(control) else "not measured"
    return [
        f"Machine: {machine.get('cpus', '?')} CPUs, Python {machine.get('python', '?')}; two-core control "
        f"{shown} (two CPU-bound loops on a fork pool of 2 against in series, median of 3: about 2.0 when two "
        "cores are free, lower means every parallel ratio below is understated).",
        "",
    ]


def _targets(results: dict[str, Any]) -> list[str]:
    rows = results.get("targets", [])
    if not rows:
        return []
    lines = ["| target | figure | result |", "|---|---|---|"]
    for row in rows:
        lines.append(f"| {_cell(row.get('target', '?'))} | {_cell(row.get('figure', '-'))} | "
                     f"{'met' if row.get('met') else '**missed**'} |")
    return [*lines, ""]


def _lora(results: dict[str, Any]) -> list[str]:
    presets = {k: v for k, v in results.get("lora", {}).items() if isinstance(v, dict)}
    if not presets:
        return []
    lines = ["| lora preset | cells | fast gradcheck gate (median of 3 runs) | naive (seed's) gate (one run) "
             "| naive / fast |", "|---|---|---|---|---|"]
    for preset, row in presets.items():
        ratio = row.get("ratio")
        lines.append(f"| {_cell(preset)} | {row.get('cells', '-')} | {_seconds(row.get('fast_seconds'))} | "
                     f"{_seconds(row.get('naive_seconds'))} | "
                     f"{f'{ratio:.0f}x' if _num(ratio) else '-'} |")
    return [*lines, ""]


def _parallel_grad(results: dict[str, Any]) -> list[str]:
    runs = results.get("parallel-grad", {})
    if not runs:
        return []
    lines = ["| parallel-grad preset / executor | serial pass (median of 5 runs) | parallel pass (median of 5 runs) "
             "| speed-up (median of the 5 runs' ratios) | peak RSS (parent + largest worker) |",
             "|---|---|---|---|---|"]
    for key, row in runs.items():
        lines.append(f"| {_cell(key)} | {_seconds(row.get('serial_seconds'))} | "
                     f"{_seconds(row.get('parallel_seconds'))} | {_times(row.get('speedup'))} | "
                     f"{_mib(row.get('rss_self'))} + {_mib(row.get('rss_children'))} |")
    return [*lines, ""]


def _training(results: dict[str, Any]) -> list[str]:
    runs = results.get("training", {})
    if not runs:
        return []
    lines = ["| training gate / preset / executor | gate seconds (median of 3 runs) | green |", "|---|---|---|"]
    for key, row in runs.items():
        lines.append(f"| {_cell(key)} | {_seconds(row.get('seconds'))} | {'yes' if row.get('passed') else 'no'} |")
    return [*lines, ""]


def render(results: dict[str, Any]) -> str:
    """The tables of the run: the machine, the targets, then the per-gate tables."""
    if not isinstance(results, dict):
        raise PerfTableError("bench.json does not hold a JSON object")
    lines = ["Generated by `make docs` from `bench-results/bench.json`, which `make bench` writes; do not edit by "
             "hand.", ""]
    lines += _machine(results)
    lines += _targets(results)
    lines += _lora(results)
    lines += _parallel_grad(results)
    lines += _training(results)
    return "\n".join(lines).rstrip("\n") + "\n"


def rewrite(document: str, table: str) -> str:
    """``document`` with the text between its two marker lines replaced by ``table``."""
    parts = document.split(MARKER + "\n")
    if len(parts) != 3:
        raise PerfTableError(f"expected exactly two '{MARKER}' lines, found {len(parts) - 1}")
    return f"{parts[0]}{MARKER}\n{table}{MARKER}\n{parts[2]}"


# ---- the rest of the document ------------------------------------------------------------------------------


def _table(header: str, rows: list[tuple[str, ...]], figures: slice = slice(1, 2)) -> list[str]:
    """A Markdown table of the rows that hold a figure: a row whose ``figures`` cells are all '-' (a measurement
    the JSON does not hold) is left out."""
    kept = [row for row in rows if any(cell != "-" for cell in row[figures])]
    if not kept:
        return []
    width = header.count("|") - 1
    return [header, "|" + "---|" * width, *(f"| {' | '.join(_cell(c) for c in row)} |" for row in kept), ""]


def large_rows_bytes(gates_toml: Path = GATES_TOML) -> tuple[int, int]:
    """parallel-grad's ``large`` preset from the packaged gates.toml: (B, NP), NP = H*D + O*H floats a row."""
    try:
        large = tomllib.loads(gates_toml.read_text(encoding="utf-8"))["gates"]["parallel-grad"]["presets"]["large"]
        return large["B"], large["H"] * large["D"] + large["O"] * large["H"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise PerfTableError(f"{gates_toml}: no parallel-grad large preset: {exc}") from None


def _three_parallel_passes(results: dict[str, Any]) -> list[str]:
    """Where a run measures parallel-grad's parallel pass at large on the process executor, and what each is."""
    found = [
        (_get(results, "parallel-grad", "large/process", "parallel_seconds"), 3,
         "[the last run](#the-last-run)'s parallel-grad table: the median of 5 runs in one child process, "
         "`workers` as the preset sets it"),
        (_get(results, "dask", "process", "parallel_seconds"), 3,
         "the [Dask](#dask) rows: the median of 5 runs in one child process with `workers=2`, what the Dask "
         "pass is divided by"),
        (_get(results, "tape", "parallel_seconds"), 4,
         "[the tape's rows](#the-tapes-rows): the median of 5 rounds, each a child process of one run, "
         "paired with the JAX and torch peers run right after it"),
    ]
    found = [(value, digits, what) for value, digits, what in found if _num(value)]
    if len(found) < 2:
        return []
    lines = [f"parallel-grad's parallel pass at `large` on the process executor is measured {len(found)} times in "
             "a run, each a statistic of its own runs:", ""]
    lines += [f"* {_seconds(value, digits)} in {what};" for value, digits, what in found]
    lines[-1] = lines[-1][:-1] + "."
    return [*lines, "", "They differ by as much as the machine's speed drifts between the measurements; each ratio "
            "below is taken against the figure measured with it, never across them.", ""]


def _reading(results: dict[str, Any]) -> list[str]:
    lines = ["## Reading the figures", ""]
    note = results.get("note")
    if isinstance(note, str) and note.strip():
        lines += [f"**The source of these figures.** {note.strip()}", ""]
    lines += [
        "Ratios that need two cores are only as good as the cores the machine gave at the time: read every "
        "parallel ratio against the two-core control at the head of [the last run](#the-last-run). "
        "Whole-process ratios (start-up) are medians of "
        "paired runs, A B A B ..., so that a drift of the machine's speed hits both sides alike. On a shared "
        "machine figures move from run to run: compare figures of one run, as this document does.",
        "",
        "Each figure is named with its statistic. A *median of N runs* repeats one measurement N times; a "
        "*median of ratios* is the median, over rounds, of each round's own ratio, so it is not the quotient "
        "of the medians printed beside it.",
        "",
    ]
    return lines + _three_parallel_passes(results)


#: the targets: (area, target, why); `benchmarks/bench.py` holds their thresholds
TARGET_ROWS = [
    ('lora',
     "the fast gradcheck at `large` at least 50x the seed's naive algorithm, with the same integers",
     "the seed's algorithm is O(T·DM²) per cell"),
    ('lora',
     '`nxgates run lora --preset large` in about a second (<= 1.5 s); `xl` green within 15 s',
     'usable at real sizes'),
    ('lora',
     'the pooled gradcheck at `large` on 2 workers at least 1.7x one worker',
     '**not met, by design**: see below'),
    ('parallel-grad',
     'the parallel pass at `large` at least 1.7x the serial pass on 2 cores',
     'data parallelism must pay'),
    ('parallel-grad',
     'the gate at `large` within 1.3x of its timed passes (serial + 2 x parallel); the whole process within 0.8 s',
     'hashing, comparing and pool start-up must stay off the critical path'),
    ('parallel-grad',
     'peak memory at `large` within 2 GiB; B=4096 within 1.3x of B=256; `xl` within 1 GiB',
     'the batch streams'),
    ('parallel-grad',
     'the thread and process executors give the same `grads_sha256`',
     'bit-identity is the claim'),
    ('parallel-grad',
     "per-example gradient throughput above `torch.func.vmap(grad)` and JAX's `jit(vmap(grad))` "
     "(only with `make peer-venv`)",
     'yardsticks users know'),
    ('parallel-grad',
     'the serial pass at `large` within 3x the row-writing floor',
     "the tape at the speed of its arithmetic: **not met as written**, see "
     "[performance-tape.md](performance-tape.md#what-the-missed-rows-mean)"),
    ('dask',
     "the parallel pass at `large` within 1.5x of the process executor's, same bits",
     'a real distributed engine at little cost on one host'),
    ('training',
     "lora-train `large` within 1.5 s; both training gates green at every preset; dp-train's weights equal "
     "on thread and process",
     ''),
    ('start-up',
     '`nxgates run lora` within 1.2x of `python -c "import numpy, click, rich"`',
     'a gate run costs little more than its imports'),
]

TARGETS = "\n".join(["## Targets", "", "| area | target | why |", "|---|---|---|",
                      *(f"| {area} | {target} |{f' {why} ' if why else ' '}|"
                        for area, target, why in TARGET_ROWS)]) + "\n"


def _why_lora_workers(results: dict[str, Any]) -> list[str]:
    fast = _get(results, "lora", "large", "fast_seconds")
    speedup = _get(results, "scale", "lora_large_workers", "speedup")
    tokens = _get(results, "scale", "lora_tokens_workers")
    text = ("**Why the lora 2-workers target stands missed.** The fast gradcheck (see "
            "[design.md](design.md#the-fast-lora-gradcheck)) leaves the whole gate at `large` ")
    text += (f"at {_seconds(fast)} in one process (median of 3 runs), " if _num(fast) else "a few milliseconds in "
             "one process, ")
    text += ("less than forking two workers and handing them the cells costs: no preset has a gradcheck long "
             "enough for a second core to pay for a fork, so `workers=0` keeps every preset in one process and "
             "forks only from `T*DM^2*R = 2^30` up.")
    if _num(speedup):
        text += (f" On 2 workers the gate at `large` runs at {_times(speedup)} one worker's speed (the quotient of "
                 "medians of 5 runs).")
    text += " The bench also times `T=2048 DM=256 R=8` (a real batch of tokens) on 1 and 2 workers, with no target"
    if isinstance(tokens, dict) and all(_num(tokens.get(k)) for k in ("one_seconds", "two_seconds", "speedup")):
        text += (f": {_seconds(tokens['one_seconds'], 2)} and {_seconds(tokens['two_seconds'], 2)}, "
                 f"{_times(tokens['speedup'])} (medians of 3 runs and their quotient)")
    return [text + ".", ""]


def _why_gate_and_dask(results: dict[str, Any], rows: tuple[int, int]) -> list[str]:
    B, NP = rows
    text = ("**Why the gate-over-timed-passes and Dask ratios read missed.** The gate hashes its B x NP serial "
            f"rows ({B} x {NP:,} float32, {B * NP * 4 / 1e6:.0f} MB at `large`) with one SHA-256 chain, on one "
            "core, and keeps that hashing off the timed parallel pass.")
    serial, parallel = _get(results, "tape", "floor", "serial_seconds"), _get(results, "tape", "parallel_seconds")
    ratio = _get(results, "scale", "pg_large_gate_over_timed")
    if _num(serial) and _num(parallel):
        text += (f" The timed passes take {_seconds(serial + 2 * parallel, 2)} (serial + 2 x parallel, from the "
                 "medians of [the tape's rows](#the-tapes-rows))")
        text += (f", and the gate, in 5 runs of its own, {ratio:.2f}x its own timed passes (median of the runs' "
                 "ratios)" if _num(ratio) else "")
        text += "."
    text += (" Beside the timed passes the run hashes those rows, runs the parallel pass again and compares, on "
             "the same two cores, and none of that shrinks when the passes get faster: the bound it puts on the "
             "ratio is worked out in [performance-tape.md](performance-tape.md#what-the-missed-rows-mean).")
    dask, process = _get(results, "dask", "dask", "parallel_seconds"), _get(results, "dask", "process",
                                                                                 "parallel_seconds")
    over = _get(results, "dask", "dask_over_process")
    text += (" The Dask pass goes through a scheduler, and its workers send every row back over TCP (the same "
             f"{B * NP * 4 / 1e6:.0f} MB a pass) where forked workers write theirs into shared memory")
    if _num(dask) and _num(process) and _num(over):
        text += (f": {_seconds(dask)} against the process executor's {_seconds(process)} (medians of 5 runs), "
                 f"their quotient {_times(over)}")
        warm = _get(results, "dask", "dask_warm_over_process")
        text += f", and {_times(warm)} on a cluster that outlives the runs" if _num(warm) else ""
    return [text + ".", ""]


def _tape_rows(results: dict[str, Any]) -> list[str]:
    tape = results.get("tape")
    if not isinstance(tape, dict) or not tape:
        return []
    floor = tape.get("floor") if isinstance(tape.get("floor"), dict) else {}
    buffer = floor.get("ufunc_buffer", "?")
    rows: list[tuple[str, ...]] = [
        ("serial pass", _seconds(floor.get("serial_seconds"), 4), "median of 5 rounds"),
        (f"row-writing floor (ufunc buffer {buffer})", _seconds(floor.get("row_writing_seconds"), 4),
         "median of 5 rounds"),
        ("**serial pass / row-writing floor** (target <= 3x)", _times(floor.get("ratio")), "median of ratios"),
        ("the same arithmetic as a plain numpy loop, no tape", _seconds(floor.get("plain_loop_seconds"), 4),
         "median of 5 rounds"),
        ("plain loop / row-writing floor", _times(floor.get("plain_loop_ratio")), "median of ratios"),
        ("serial pass / plain loop", _times(floor.get("serial_over_plain_loop")), "median of ratios"),
        ("row-writing floor at numpy's default ufunc buffer", _seconds(floor.get("default_buffer_row_writing_seconds"),
                                                                      4), "median of 5 rounds"),
        ("serial pass / that floor", _times(floor.get("default_buffer_ratio")), "median of ratios"),
        ("`reduction=sequential`'s serial pass", _seconds(_get(tape, "sequential", "serial_seconds"), 4),
         "median of 5 rounds"),
        ("**`reduction=sequential`'s serial pass / the tree's** (target <= 2x)",
         _times(_get(tape, "sequential", "ratio_to_tree")), "median of ratios"),
        ("parallel pass (process executor, 2 workers)", _seconds(tape.get("parallel_seconds"), 4),
         "median of 5 rounds"),
    ]
    for name, what in (("jax", "JAX {} `jit(vmap(grad))`"), ("torch", "torch {} `torch.func.vmap(grad)`")):
        peer = tape.get(name)
        if not isinstance(peer, dict):
            continue
        label = what.format(peer.get("version", "?"))
        rows.append((label, _seconds(peer.get("seconds"), 4), "median of 5 rounds"))
        speeds = peer.get("speeds")
        rounds = (f"; the rounds: {', '.join(f'{s:.2f}' for s in speeds)}"
                  if isinstance(speeds, list) and all(_num(s) for s in speeds) else "")
        rows.append((f"**the parallel pass's speed / {label}'s** (target > 1x)", _times(peer.get("speed")),
                     f"median of ratios{rounds}"))
    for executor in ("thread", "process"):
        step = tape.get(f"dp_train_large_{executor}") or {}
        rows.append((f"dp-train `large`, a step ({executor}): serial, parallel",
                     f"{_seconds(step.get('serial_step_seconds'))}, {_seconds(step.get('parallel_step_seconds'))}"
                     if _num(step.get("serial_step_seconds")) else "-", "median of 3 runs"))
    rows.append(("ta-gradcheck `large`, whole process", _seconds(tape.get("ta_gradcheck_large_whole_process_seconds"),
                                                                  2), "median of 5 runs"))
    table = _table("| row | figure | statistic |", rows)
    if not table:
        return []
    return ["## The tape's rows", "",
            "`benchmarks/bench_tape.py`: 5 rounds, each running parallel-grad at `large` on the process executor "
            "once, then the floors, the plain loop and the peers right after it (the peers only with "
            "`make peer-venv`). What each row means: [performance-tape.md](performance-tape.md).", "", *table]


def _scale_rows(results: dict[str, Any]) -> list[str]:
    scale = results.get("scale")
    if not isinstance(scale, dict):
        return []
    workers = scale.get("lora_large_workers") or {}
    xl_workers = scale.get("lora_xl_workers") or {}
    tokens = scale.get("lora_tokens_workers") or {}
    pg_xl = scale.get("pg_xl") or {}

    def one_two(row: dict, digits: int) -> str:
        if not _num(row.get("speedup")):
            return "-"
        speed = f"2 workers at {_times(row['speedup'])} one worker's speed"
        if not (_num(row.get("one_seconds")) and _num(row.get("two_seconds"))):
            return speed
        return f"{_seconds(row['one_seconds'], digits)} on 1, {_seconds(row['two_seconds'], digits)} on 2: {speed}"

    rows: list[tuple[str, ...]] = [
        ("parallel-grad `large`: gate seconds / (serial + 2 x parallel pass)",
         _times(scale.get("pg_large_gate_over_timed")), "median of 5 runs' ratios"),
        ("parallel-grad `large`, whole process", _seconds(scale.get("pg_large_whole_process_seconds"), 2),
         "median of 5 runs"),
        ("parallel-grad `large`, peak RSS at B=256 and B=4096 (parent + largest worker)",
         f"{_mib(scale.get('pg_large_B256_peak_rss'))}, {_mib(scale.get('pg_large_B4096_peak_rss'))}"
         if _num(scale.get("pg_large_B256_peak_rss")) else "-", "one run each"),
        ("parallel-grad `xl`, peak RSS (parent + largest worker)", _mib(pg_xl.get("peak_rss")), "one run"),
        ("parallel-grad `xl`, gate seconds", _seconds(pg_xl.get("seconds"), 1), "one run"),
        ("lora `large`, 1 and 2 workers", one_two(workers, 3), "medians of 5 runs, their quotient"),
        ("lora `xl`, 1 and 2 workers (no target)", one_two(xl_workers, 2), "one run each"),
        ("lora `T=2048 DM=256 R=8`, 1 and 2 workers (no target)", one_two(tokens, 2),
         "medians of 3 runs, their quotient"),
        ("lora `xl`, whole process", _seconds(scale.get("lora_xl_whole_process_seconds"), 1), "one run"),
        *((f"ta-gradcheck `{p}` (no target)", _seconds(_get(scale, f"ta_gradcheck_{p}", "seconds"), 2), "one run")
          for p in ("large", "xl")),
    ]
    table = _table("| row | figure | statistic |", rows)
    return ["## Scale", "", "`.venv/bin/python benchmarks/bench.py --scale` prints these rows alone.", "", *table] \
        if table else []


def _dask_rows(results: dict[str, Any]) -> list[str]:
    dask = results.get("dask")
    if not isinstance(dask, dict):
        return []
    rows: list[tuple[str, ...]] = []
    for executor, what in (("process", "process"), ("dask", "dask, a cluster a run"),
                           ("dask-warm", "dask, one cluster for every run")):
        row = dask.get(executor) or {}
        rows.append((what, _seconds(row.get("parallel_seconds")), _seconds(row.get("serial_seconds")),
                     _seconds(row.get("cluster_start_seconds"), 2) if executor == "dask" else "-"))
    table = _table("| parallel-grad `large`, 2 workers | parallel pass (median of 5 runs) | serial pass "
                   "(median of 5 runs) | cluster start (median of 5 runs) |", rows, slice(1, 4))
    return ["## Dask", "", "`.venv/bin/python benchmarks/bench_dask.py` prints these rows alone.", "", *table] \
        if table else []


def _startup(results: dict[str, Any]) -> list[str]:
    s = results.get("startup")
    if not isinstance(s, dict) or not _num(s.get("ratio")):
        return []
    text = "**Start-up.** `nxgates run lora` "
    if _num(s.get("nxgates_run_lora_seconds")) and _num(s.get("import_numpy_click_rich_seconds")):
        text += (f"{_seconds(s['nxgates_run_lora_seconds'])} against `python -c \"import numpy, click, rich\"` "
                 f"{_seconds(s['import_numpy_click_rich_seconds'])} (medians of 21 runs each), ")
    return [text + f"{_times(s['ratio'])} (median of 21 paired runs' ratios).", ""]


HEADER = """\
<!-- Generated by `make docs` (tools/perf_table.py) from bench-results/bench.json: edit the script, not this file. -->
# Performance

`make bench` (`benchmarks/bench.py`) measures speed and memory against the targets below, each gate in a
child process so that its peak RSS is its own, prints a table, writes `bench-results/bench.json` and
exits 1 if a target is missed. `make docs` (`tools/perf_table.py`) then writes this whole document from
that JSON and keeps the JSON it read as `docs/bench.json`: every figure here is a field of that one file,
and `tools/perf_table.py --check` (a test runs it) fails when this document is not what the script makes
of it.

```sh
make bench                                     # every measurement (several minutes); bench-results/bench.json
.venv/bin/python benchmarks/bench.py --scale   # only the scale rows, printed
.venv/bin/python benchmarks/bench_tape.py      # only the tape's rows, printed
.venv/bin/python benchmarks/bench_dask.py      # only the Dask rows, printed
make peer-venv                                 # optional: torch and JAX into .venv-peer, for the peer rows
make docs                                      # this document, from bench-results/bench.json
```

"""

FOOTER = ("The tape's record-and-replay, the row-writing floor and the JAX and torch peers: "
          "[performance-tape.md](performance-tape.md).\n")


def document(results: dict[str, Any], rows: tuple[int, int] | None = None) -> str:
    """The whole of docs/performance.md for ``results`` (``rows``: parallel-grad large's (B, NP), read from the
    packaged gates.toml when not given)."""
    table = render(results)  # refuses a non-object first
    lines = [HEADER.rstrip("\n"), ""]
    lines += _reading(results)
    lines += [TARGETS]
    lines += _why_lora_workers(results)
    lines += _why_gate_and_dask(results, rows or large_rows_bytes())
    lines += ["## The last run", "", MARKER, table.rstrip("\n"), MARKER, ""]
    lines += _tape_rows(results)
    lines += _scale_rows(results)
    lines += _dask_rows(results)
    lines += _startup(results)
    lines += [FOOTER]
    return "\n".join(lines).rstrip("\n") + "\n"


def first_difference(have: str, want: str) -> str:
    """Where ``have`` first departs from ``want``: a line number and both lines."""
    a, b = have.splitlines(), want.splitlines()
    for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return f"line {number}: {x!r} where the JSON gives {y!r}"
    if len(a) > len(b):
        return f"line {len(b) + 1}: {a[len(b)]!r}, which the JSON does not give"
    return f"line {len(a) + 1}: missing {b[len(a)]!r}"


def load(path: Path, hint: str) -> dict[str, Any]:
    if not path.is_file():
        raise PerfTableError(f"{path} does not exist; {hint}")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PerfTableError(f"{path}: cannot read: {exc}") from None
    if not isinstance(results, dict):
        raise PerfTableError(f"{path} does not hold a JSON object")
    return results


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PerfTableError(f"{path}: cannot read: {exc.strerror or exc}") from None


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", type=Path, help=f"the benchmark's JSON (default: {BENCH_JSON}; with --check, "
                                                   f"{SOURCE_JSON})")
    parser.add_argument("--doc", type=Path, help="fill only the tables between this document's two markers")
    parser.add_argument("--check", action="store_true",
                        help=f"write nothing: exit 1 when {PERF_DOC} is not what the JSON gives")
    args = parser.parse_args(argv)
    try:
        if args.check:
            bench = args.bench or SOURCE_JSON
            want = document(load(bench, "run `make bench`, then `make docs`"))
            have = _read(args.doc or PERF_DOC)
            if have != want:
                print(f"perf_table: {args.doc or PERF_DOC} is not what {bench} gives: {first_difference(have, want)}"
                      f"; run `make docs`, or `tools/perf_table.py --bench {bench}`", file=sys.stderr)
                return 1
            out(f"perf_table: {args.doc or PERF_DOC} is what {bench} gives")
            return 0
        bench = args.bench or BENCH_JSON
        results = load(bench, "run `make bench` first")
        if args.doc:
            args.doc.write_text(rewrite(_read(args.doc), render(results)), encoding="utf-8")
            out(f"perf_table: wrote the tables into {args.doc}")
            return 0
        PERF_DOC.write_text(document(results), encoding="utf-8")
        copied = ""
        if bench.resolve() != SOURCE_JSON.resolve():
            SOURCE_JSON.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
            copied = f", and copied the JSON to {SOURCE_JSON}"
        out(f"perf_table: wrote {PERF_DOC} from {bench}{copied}")
    except PerfTableError as exc:
        print(f"perf_table: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
