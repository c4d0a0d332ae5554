"""The page's plots as inline SVG, drawn by matplotlib without pyplot (no global figure state, no GUI).

Every text drawn that came from outside passes :func:`label`; every text put into the SVG's markup (the
``aria-label``, a point's ``<title>`` tooltip) is HTML-escaped, so no plot can carry markup of its own.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from html import escape as html_escape

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, ScalarFormatter

from nxgates.reporting.html.cells import ErrorGrid
from nxgates.streams import shown

rcParams["svg.hashsalt"] = "nxgates"  # the same page for the same report: ids do not change run to run
rcParams["svg.fonttype"] = "path"  # glyphs as paths: the page needs no font to look the same everywhere
#: scatter markers on failing cells only while they are few; beyond that the red pixels alone show them
MAX_MARKERS = 64
#: a heatmap writes each cell's error in it while it has at most this many cells
MAX_ANNOTATED = 64
FAIL_RED = "#d62728"
OK_BLUE = "#1f77b4"
MUTED = "#9e9e9e"


def label(text: object) -> str:
    """Outside text as matplotlib draws it: on one line, and never read as mathtext (``$...$``)."""
    return shown(str(text)).replace("$", r"\$")


def to_svg(fig: Figure, alt: str, tooltips: Mapping[str, str] | None = None) -> str:
    """The figure as an ``<svg role="img">`` element named by ``alt`` (no XML prolog, no date), to paste
    into HTML; ``tooltips`` maps an artist's gid to the text a browser shows when the pointer rests on it."""
    FigureCanvasSVG(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # matplotlib's comments (each text drawn, again) and indentation are a third of its SVG: leave them out
    text = re.sub(r"\n\s+", "\n", re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL))
    text = text.replace("<svg ", f'<svg role="img" aria-label="{_attr(alt)}" ', 1)
    for gid, tip in (tooltips or {}).items():
        text = re.sub(f'(<g id="{re.escape(gid)}">)', lambda m, tip=tip: f"{m.group(1)}<title>{_attr(tip)}</title>",
                      text, count=1)
    return text


def _attr(text: str) -> str:
    return html_escape(shown(text))


def heatmap(grid: ErrorGrid, vmin: float) -> str:
    """Each cell's error in permil of max|grad| on a log scale from ``vmin`` up to the tolerance, so a
    passing run's structure shows; beyond the tolerance red (and crossed while few)."""
    fig = Figure(figsize=(5.2, 3.4))
    ax = fig.add_subplot()
    vmax = max(float(grid.tol_permil), 1.0)
    cmap = _blues()
    norm = LogNorm(vmin=min(vmin, vmax / 10), vmax=vmax, clip=False)
    data = np.maximum(grid.error, norm.vmin)  # an exact cell (error 0) at the bottom of the scale
    data = np.where(grid.failing, np.maximum(data, vmax * 1.001), data)  # a failing cell beyond it (tol 0)
    image = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, extend="max", extendfrac=0.08)
    bar.set_label(f"error, permil of max|grad| (log)\nred: beyond tol {grid.tol_permil}", fontsize=8)
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.ax.axhline(vmax, color=FAIL_RED, linewidth=2)
    bar.ax.text(1.6, vmax, f" tol {grid.tol_permil}", transform=bar.ax.get_yaxis_transform(), va="center",
                fontsize=8, color=FAIL_RED)
    rows, cols = grid.error.shape
    if grid.block == (1, 1) and rows * cols <= MAX_ANNOTATED:
        for (y, x), value in np.ndenumerate(grid.error):
            dark = math.log(max(value, norm.vmin) / norm.vmin) > 0.6 * math.log(vmax / norm.vmin)
            ax.text(x, y, _short(value), ha="center", va="center", fontsize=7,
                    color="white" if dark or grid.failing[y, x] else "#222")
    if grid.failing.any():
        key = fig.legend(handles=[Patch(color=FAIL_RED, label=f"fails: error > {grid.tol_permil} permil")],
                         loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=9, frameon=False)
        key.set_gid("failing-cells")
        ys, xs = np.nonzero(grid.failing)
        if ys.size <= MAX_MARKERS and rows * cols > MAX_ANNOTATED:
            ax.scatter(xs, ys, marker="x", color="black", s=24, linewidths=1.2, gid="failing-markers")
    shape = "DM x R" if grid.name == "A" else "R x DM"
    title = (f"{grid.name} ({shape} = {rows * grid.block[0]} x {cols * grid.block[1]}): "
             f"{grid.failing_cells} failing cell{'s' * (grid.failing_cells != 1)}, "
             f"worst {_short(float(grid.error.max(initial=0)))} permil")
    br, bc = grid.block
    if (br, bc) != (1, 1):
        title += f"\nmax-pooled: each pixel is the worst of {br} x {bc} cells"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("column" if bc == 1 else f"column block ({bc} columns each)")
    ax.set_ylabel("row" if br == 1 else f"row block ({br} rows each)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return to_svg(fig, f"gradcheck heatmap of {grid.name}: {grid.failing_cells} failing cells")


def _blues():
    from matplotlib import colormaps

    return colormaps["Blues"].with_extremes(over=FAIL_RED)


def _short(value: float) -> str:
    """A cell's error as few characters as read well inside it: 0, 0.04, 1.3, 12, 140."""
    if value == 0:
        return "0"
    if value < 0.1:
        return f"{value:.1g}"
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def loss_curve(steps: Sequence[float | None], title: str, ylabel: str, tips: Sequence[str], uid: str) -> str:
    """Loss per step in real units; a gap where a loss was not finite (None); each point's tooltip is
    ``tips[i]`` (the exact value the gate recorded, e.g. a Q40 integer)."""
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    values = [np.nan if v is None else float(v) for v in steps]
    ax.plot(range(len(values)), values, color=OK_BLUE)
    every = max(1, len(values) // 64)  # a marker (and tooltip) per step while they fit, else every n-th
    tooltips = {}
    for i in range(0, len(values), every):
        if not math.isnan(values[i]):
            gid = f"{uid}-step-{i}"
            ax.plot([i], [values[i]], marker="o", color=OK_BLUE, gid=gid)
            tooltips[gid] = tips[i]
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    ax.yaxis.set_major_formatter(formatter)  # real units as plain numbers: no "1e12" offset to decode
    ax.set_ylabel(label(ylabel))
    ax.set_title(label(title), fontsize=10)
    ax.grid(alpha=0.3)
    return to_svg(fig, label(title), tooltips)


def tasks_per_worker(tasks: Mapping[str, float], title: str) -> str:
    """Tasks each worker completed, with the even share as a line: a skewed or single-worker pool shows."""
    fig = Figure(figsize=(5.6, 2.8))
    ax = fig.add_subplot()
    labels, values = [label(k) for k in tasks], [float(v) for v in tasks.values()]
    ax.bar(labels, values, color=OK_BLUE, width=0.6)
    even = sum(values) / max(1, len(values))
    ax.axhline(even, color="#555", linestyle="--", linewidth=1)
    ax.annotate(f"even share {even:.3g}", (1.0, even), xycoords=("axes fraction", "data"), xytext=(4, 0),
                textcoords="offset points", va="center", fontsize=8, color="#555")
    for x, v in enumerate(values):
        ax.annotate(f"{v:g}", (x, v), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8)
    ax.set_ylim(0, max([*values, 1.0]) * 1.25)
    if len(labels) > 8:
        ax.tick_params(axis="x", labelrotation=60)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("worker")
    ax.set_ylabel("tasks completed")
    ax.set_title(label(title), fontsize=10)
    return to_svg(fig, label(title))


def pass_times(times: Mapping[str, float], title: str, baseline: str | None) -> str:
    """Wall time of each pass in milliseconds (or seconds), each bar labelled with its ratio to ``baseline``."""
    fig = Figure(figsize=(5.4, 0.9 + 0.45 * len(times)))
    ax = fig.add_subplot()
    seconds = [float(v) for v in times.values()]
    scale, unit = (1000.0, "ms") if max(seconds, default=0) < 1 else (1.0, "s")
    labels = [label(k) for k in times]
    colours = [MUTED if "start" in k else OK_BLUE for k in times]
    ax.barh(labels, [s * scale for s in seconds], color=colours)
    ax.invert_yaxis()
    base = times.get(baseline) if baseline else None
    for y, (name, s) in enumerate(times.items()):
        note = f" {s * scale:.3g} {unit}"
        if base and name != baseline and "start" not in name:
            note += f" ({s / base:.2g}x {label(baseline)})"
        ax.annotate(note, (s * scale, y), va="center", fontsize=8)
    ax.set_xlim(0, max(seconds, default=1) * scale * 1.45 or 1)
    ax.set_xlabel(f"wall time ({unit})")
    ax.set_title(label(title), fontsize=10)
    return to_svg(fig, label(title))


def worst_vs_tolerance(rows: Sequence[tuple[str, int, str]], tol: int, title: str) -> str:
    """Each op's worst error (integer permil, as the gate judged it) against the tolerance, on a scale
    linear below 1 permil and logarithmic above, so 0 and 1000 both read; bars beyond it red."""
    fig = Figure(figsize=(6.4, 0.9 + 0.38 * len(rows)))
    ax = fig.add_subplot()
    names = [label(n) for n, _, _ in rows]
    worst = [float(w) for _, w, _ in rows]
    ax.barh(names, worst, color=[FAIL_RED if w > tol else OK_BLUE for w in worst])
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1, linscale=0.5)
    top = max([*worst, tol, 1.0]) * 4
    ax.set_xlim(0, top)
    ax.axvline(tol, color=FAIL_RED, linestyle="--", linewidth=1.2)
    ax.annotate(f"tolerance {tol}", (tol, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                textcoords="offset points", ha="center", va="bottom", fontsize=8, color=FAIL_RED)
    for y, (_, w, cells) in enumerate(rows):
        text = "<1 permil" if w == 0 else f"{w} permil"
        ax.annotate(f" {text}" + (f" ({label(cells)})" if cells else ""), (max(w, 0), y), va="center", fontsize=8)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("worst error, permil of max|grad| (0 = under 1 permil)")
    ax.set_title(label(title), fontsize=10, pad=14)
    return to_svg(fig, label(title))


def ulp_histogram(counts: Mapping[str, float], failing: set[str], title: str, xlabel: str) -> str:
    """Cells per distance bucket on a log count scale (one differing cell still shows beside thousands of
    equal ones), each bar labelled with its count; buckets beyond the allowed distance red."""
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    labels, values = [label(k) for k in counts], [float(v) for v in counts.values()]
    colours = [FAIL_RED if k in failing else (MUTED if k.startswith("not listed") else OK_BLUE) for k in counts]
    ax.bar(labels, values, color=colours)
    ax.set_yscale("log")
    ax.set_ylim(0.5, max([*values, 1.0]) * 8)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    for x, v in enumerate(values):
        ax.annotate(f"{v:g}", (x, max(v, 0.5)), ha="center", va="bottom", fontsize=8)
    if len(labels) > 6:
        ax.tick_params(axis="x", labelrotation=30)
    handles = [Patch(color=OK_BLUE, label="allowed"), Patch(color=FAIL_RED, label="beyond the allowed distance")]
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="upper right")
    ax.set_xlabel(label(xlabel))
    ax.set_ylabel("cells (log)")
    ax.set_title(label(title), fontsize=10)
    return to_svg(fig, label(title))
