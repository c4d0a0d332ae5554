"""Each gate's plot on the page, from the JSON the gate really writes: present for that gate, named (its
``aria-label``, the alt text of an inline SVG), captioned, led by its failing check, and bounded."""

import re

import numpy as np
import pytest

from nxgates.reporting.html import compared, html_text
from tests.reporting.html_runs import merged, scenarios
from tests.reporting.test_html import doc, lora_gate, parse


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return scenarios(tmp_path_factory.mktemp("runs"))


def figure_html(text: str, gate: str, kind: str) -> str:
    """The ``<figure>`` of one gate's plot, as written on the page."""
    found = re.search(rf'<figure class="plot" data-plot="{re.escape(kind)}" data-gate="{re.escape(gate)}".*?</figure>',
                      text, re.DOTALL)
    assert found, (gate, kind)
    return found.group(0)


def aria(figure: str) -> str:
    return re.search(r'<svg role="img" aria-label="([^"]*)"', figure).group(1)


def failures(text: str) -> str:
    """The page's "What failed" part: from its heading to the first gate's section."""
    start = text.index('<h2 id="failures">')
    return text[start:text.index("<section", start)]


def test_the_page_leads_with_the_verdict_a_row_per_gate_then_what_failed(reports):
    text = html_text(merged(reports["lora"], reports["lora-transposed-b"], reports["dp-train"]))
    parse(text)
    verdict, overview, failed, first_gate = (text.index(s) for s in (
        'class="verdict verdict-fail"', 'class="gates"', 'id="failures"', "<section"))
    assert verdict < overview < failed < first_gate
    assert "FAILED: 2 of 3 gates passed" in text
    rows = re.findall(r"<tr><td><a href=\"#gate-", text)
    assert len(rows) == 3
    red = failures(text)
    assert "gradcheck B (lora)" in red and "2/12 cells within 70permil (worst=1025permil)" in red
    assert 'data-plot="gradcheck-B"' in red and 'data-plot="gradcheck-A"' not in red  # the failing check's plot
    assert text.count('data-plot="gradcheck-B"') == 2  # led with once, drawn once for each lora gate


def test_everything_else_is_folded_and_said_once(reports):
    text = html_text(merged(reports["parallel-grad"], reports["ta-gradcheck"]))
    parse(text)
    for summary in ("Parameters", "Figures (", "Pinned figures", "Environment"):
        assert re.search(rf"<details[^>]*><summary>{re.escape(summary)}", text), summary
    assert "<h3>Execution</h3>" not in text and "Execution" not in text  # no heading, empty or repeated
    pool = text[text.index('id="gate-parallel-grad"'):text.index('id="gate-ta-gradcheck"')]
    assert pool.count("ran with <code>thread</code>") == 1 and pool.count("ran with <code>2</code>") == 1
    assert "<th>executor</th>" in pool and pool.count("<th>workers</th>") == 1  # the metrics' copy left out


def test_arrays_have_their_shape_and_no_python_repr(reports):
    text = html_text(merged(reports["lora-compare"], reports["parallel-grad-compare"], reports["lora-train"]))
    parse(text)
    assert "{'" not in text and "[{" not in text and "'tensor'" not in text  # no dict or list repr anywhere
    lora = text[text.index('id="gate-lora"'):]
    assert "<th>A.analytic</th><td><code>[6x2]</code>" in lora  # shape from the pinned record
    cells = re.search(r"<th>A.analytic</th><td>.*?<table class=\"cells\">(.*?)</table>", lora).group(1)
    assert cells.count("<tr>") == 6 and cells.count("<td>") == 12
    assert '<th>losses</th><td><code>[11]</code>' in text and 'class="spark"' in text


def test_lora_heatmaps_show_a_passing_runs_structure_on_a_log_scale(reports):
    from nxgates.reporting.html import cells

    gate = reports["lora"]["gates"][0]
    grids = cells.gradcheck_grids(gate)
    a = next(g for g in grids if g.name == "A")
    assert a.failing_cells == 0 and a.error.max() <= a.tol_permil
    assert len(np.unique(np.round(a.error, 2))) > 6  # cells that differ, not one flat colour
    text = html_text(reports["lora"])
    figure = figure_html(text, "lora", "gradcheck-A")
    assert aria(figure) == "gradcheck heatmap of A: 0 failing cells"
    assert "log scale up to the tolerance (70 permil, the red line on the colour bar)" in figure
    assert 'data-failing-cells="0"' in figure


def test_ta_gradcheck_plots_worst_error_per_op_against_the_tolerance(reports):
    green = html_text(reports["ta-gradcheck"])
    figure = figure_html(green, "ta-gradcheck", "worst-vs-tolerance")
    assert aria(figure) == "ta-gradcheck: worst error per op against the tolerance"
    assert "the dashed line is the tolerance, 10 permil" in figure
    red = html_text(reports["ta-relu-grad"])
    parse(red)
    led = failures(red)
    assert "op relu" in led and 'data-plot="worst-vs-tolerance"' in led
    assert led.count('data-plot="worst-vs-tolerance"') == 1  # relu and the MLP share one plot, drawn once
    assert "Its plot is above: worst-vs-tolerance." in led


def test_parallel_grad_plots_tasks_per_worker_and_pass_times_with_why(reports):
    text = html_text(reports["parallel-grad"])
    tasks = figure_html(text, "parallel-grad", "tasks-per-worker")
    assert re.fullmatch(r"parallel-grad: 8 tasks on (\d+) of \1 worker\(s\)", aria(tasks))
    times = figure_html(text, "parallel-grad", "pass-times")
    assert aria(times) == "parallel-grad: pass times" and "microseconds of serial work" in times


def test_a_pool_worker_that_ran_nothing_is_a_bar_of_zero():
    gate = {"name": "parallel-grad", "passed": False, "seconds": 1.0, "params": {},
            "checks": [{"name": "T2 pool ran all B tasks on >1 worker", "passed": False, "detail": "1 worker"}],
            "metrics": {"workers": 3, "tasks_per_worker": {"1": 8}}}
    text = html_text(doc(gate))
    figure = figure_html(failures(text), "parallel-grad", "tasks-per-worker")
    assert aria(figure) == "parallel-grad: 8 tasks on 1 of 3 worker(s)"


@pytest.mark.parametrize(("serial", "parallel", "said"), [
    (0.0072, 0.0120, "The parallel pass is slower here"),
    (0.72, 0.36, "The parallel pass is 2x faster than serial here"),
])
def test_pass_times_say_why_small_sizes_favour_serial(serial, parallel, said):
    gate = {"name": "parallel-grad", "passed": True, "seconds": 1.0, "params": {"B": 8}, "checks": [],
            "metrics": {"serial_seconds": serial, "parallel_seconds": parallel, "pool_start_seconds": 0.01,
                        "tasks_completed": 8, "workers": 2}}
    figure = figure_html(html_text(doc(gate)), "parallel-grad", "pass-times")
    assert said in figure
    assert ("dispatch overhead dominates" in figure) == (parallel >= serial)
    assert "Pool start is paid once per run" in figure


def test_lora_train_loss_is_in_real_units_with_the_integer_in_a_tooltip_and_a_table(reports):
    gate = reports["lora-train"]["gates"][0]
    losses = gate["metrics"]["losses"]
    figure = figure_html(html_text(reports["lora-train"]), "lora-train", "loss")
    assert aria(figure) == "lora-train: loss per step"
    first = losses[0] / 2**40
    assert f"<title>step 0: loss {first:.6g} (loss_q {losses[0]}, Q40: loss_q / 2^40)</title>" in figure
    assert figure.count("<title>step ") == len(losses)
    table = re.search(r'<table class="loss-table">.*?</table>', figure).group(0)
    assert f"<td>{first:.6g}</td><td><code>{losses[0]}</code></td>" in table


def drawn_text(svg: str) -> list[str]:
    return [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_plot_text_reads_in_real_units_and_names_the_tolerance(reports):
    """With text kept as text, what the axes say: the loss's ticks are plain numbers near 1 (no 1e12 offset
    to decode), the heatmap's colour bar names the tolerance."""
    import matplotlib

    from nxgates.reporting.html import cells
    from nxgates.reporting.html import plots as drawing

    losses = reports["lora-train"]["gates"][0]["metrics"]["losses"]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        curve = drawing.loss_curve([v / 2**40 for v in losses], "lora-train: loss per step",
                                   "loss (loss_q / 2^40)", [str(v) for v in losses], "t")
        grid = cells.gradcheck_grids(reports["lora"]["gates"][0])[0]
        heat = drawing.heatmap(grid, 0.01)
    ticks = drawn_text(curve)
    assert "1.2" in ticks and not any("e" in t.lower() for t in ticks if t[:1].isdigit())
    assert "loss (loss_q / 2^40)" in ticks
    assert "tol 70" in drawn_text(heat) and "0.01" in drawn_text(heat)


def test_dp_train_loss_is_plotted_with_its_float_values(reports):
    gate = reports["dp-train"]["gates"][0]
    figure = figure_html(html_text(reports["dp-train"]), "dp-train", "loss")
    assert aria(figure) == "dp-train: loss per step"
    assert f"<title>step 0: loss {gate['metrics']['losses'][0]!r}</title>" in figure
    assert "loss_q" not in figure


def test_compare_grads_draws_the_ulp_histogram_and_the_first_differing_cells(reports):
    text = html_text(reports["parallel-grad-compare"])
    led = failures(text)
    figure = figure_html(led, "parallel-grad", "ulp-histogram")
    assert aria(figure) == "parallel-grad --compare-grads: cells per ULP distance"
    report = reports["parallel-grad-compare"]["gates"][0]["metrics"]["compare_grads"]
    rows = re.search(r'<table class="first-differing">(.*?)</table>', figure).group(1)
    assert rows.count("<tr>") == 1 + len(report["first_differing"])
    first = report["first_differing"][0]
    assert f"<td><code>{first['tensor']}[{first['row']},{first['col']}]</code></td>" in rows
    assert f"<td><code>{first['theirs']!r}</code></td>" in rows  # shortest round trip: 1 ULP reads apart
    bars = compared.histogram(report)
    assert {"1", "2-3", "sign"} <= bars.failing and "0" not in bars.failing


def test_integer_compare_grads_is_bucketed_by_its_differences(reports):
    report = reports["lora-compare"]["gates"][0]["metrics"]["compare_grads"]
    bars = compared.histogram(report)
    assert bars.counts == {"0": 22, "1": 1, "2-3": 1, "4-15": 0, "16+": 0}
    figure = figure_html(failures(html_text(reports["lora-compare"])), "lora", "ulp-histogram")
    assert "<th>difference</th>" in figure and "<td><code>3</code></td>" in figure
    assert 'data-differing-cells="2"' in figure


def test_integer_cells_the_report_does_not_list_are_a_bar_of_their_own():
    report = {"differing_cells": 30, "tensors": {"dA": {"cells": 100, "differing": 30}},
              "first_differing": [{"tensor": "dA", "row": 0, "col": i, "ours": 0, "theirs": 1} for i in range(10)]}
    bars = compared.histogram(report)
    assert bars.counts["0"] == 70 and bars.counts["1"] == 10 and bars.counts["not listed (20)"] == 20
    assert sum(bars.counts.values()) == 100 and "lists 10 of the 30" in bars.note


def test_an_invariance_comparison_that_differs_is_drawn_for_its_check():
    report = {"cells": 64, "differing_cells": 2, "failing_cells": 2, "max_ulps": 3,
              "histogram": {"0": 62, "1": 1, "2-3": 1, "4-15": 0, "16+": 0}, "sign_differences": 0,
              "nonfinite": 0, "first_differing": [{"row": 1, "index": 4, "expected": 1.0, "got": 1.0000001,
                                                   "ulps": 1}]}
    gate = {"name": "invariance", "passed": False, "seconds": 1.0, "params": {},
            "checks": [{"name": "I2 any split == whole batch", "passed": False, "detail": "2 cells differ"}],
            "metrics": {"ulp": 0, "ulp_reports": {"I1": {"out": {**report, "differing_cells": 0,
                                                                  "first_differing": []}},
                                                  "I2": {"out": report}}}}
    text = html_text(doc(gate))
    parse(text)
    led = failures(text)
    figure = figure_html(led, "invariance", "ulp-I2-out")
    assert "<th>expected</th><th>got</th>" in figure and "<td><code>[1,4]</code></td>" in figure
    assert "ulp-I1-out" not in text  # a comparison with no differing cell has nothing to draw


def test_at_xl_tables_and_lines_stay_bounded():
    gate = lora_gate(1024, 16, bad_a=tuple(range(0, 16384, 7)))
    gate["metrics"]["losses"] = [float(i) for i in range(5000)]
    gate["metrics"]["compare_grads"] = {"differing_cells": 5000, "tensors": {"dA": {"cells": 16384}},
                                        "first_differing": [{"tensor": "dA", "row": i, "col": 0, "ours": 0,
                                                             "theirs": 1} for i in range(500)]}
    text = html_text(doc(gate))
    parse(text)
    assert len(text) < 600_000
    figure = figure_html(text, "lora", "loss")
    assert figure.count("<title>") <= 80 and figure.count("<tr>") <= 18  # markers and rows capped
    first = figure_html(text, "lora", "ulp-histogram")
    assert "the first 20 of 5000 differing cells" in first and first.count("<tr>") == 21
    spark = re.findall(r'<svg class="spark"[^>]*><path d="([^"]*)"', text)
    assert spark and max(p.count("L") for p in spark) < 2 * 200 + 2


def test_outside_text_in_plots_is_escaped():
    hostile = '"><script>alert(1)</script>&'
    gate = {"name": f"g{hostile}", "passed": False, "seconds": 1.0, "params": {"B": 2},
            "checks": [{"name": f"T2 {hostile} task worker", "passed": False, "detail": hostile},
                       {"name": f"loss {hostile}", "passed": False, "detail": "x"}],
            "metrics": {"losses": [1.0, None, 0.5], "tasks_per_worker": {hostile: 2, "1": 0},
                        "compare_grads": {"differing_cells": 1, "tensors": {hostile: {"cells": 4}},
                                          "first_differing": [{"tensor": hostile, "row": 0, "col": 0,
                                                               "ours": 1, "theirs": 2}]}}}
    text = html_text(doc(gate))
    page = parse(text)
    assert "<script" not in text and "&lt;script&gt;" in text
    assert {f["data-plot"] for f in page.figures} >= {"loss", "tasks-per-worker", "ulp-histogram"}
    assert all(f["data-gate"] == gate["name"] for f in page.figures)  # the attribute holds it whole


@pytest.mark.parametrize(("tol", "off", "fails"), [(0, 1, True), (1, 140, True), (1000, 140, False)])
def test_heatmaps_draw_at_any_tolerance(tol, off, fails):
    """A cell ``off`` permil wrong (max|grad| is 1000), the rest exact: red exactly when the gate fails it,
    also when it sits on the top of the scale (1 permil at tol 0)."""
    gate = lora_gate(6, 2)
    gate["metrics"]["A"]["numeric"][3] += off
    gate["params"]["tol_permil"] = tol
    text = html_text(doc(gate))
    parse(text)
    figure = figure_html(text, "lora", "gradcheck-A")
    assert f'data-failing-cells="{int(fails)}"' in figure
    assert (red_pixels(figure) > 0) == fails


def red_pixels(figure: str) -> int:
    """FAIL_RED pixels of the heatmap's embedded raster."""
    import base64
    import io

    from matplotlib.image import imread

    data = re.search(r'xlink:href="data:image/png;base64,([^"]+)"', figure).group(1)
    pixels = (imread(io.BytesIO(base64.b64decode(data)))[..., :3] * 255).round().astype(int)
    return int(np.count_nonzero(np.all(np.abs(pixels - (214, 39, 40)) <= 2, axis=-1)))
