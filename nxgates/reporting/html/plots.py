"""The page's plots as inline SVG, drawn by matplotlib without pyplot (no global figure state, no GUI)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from nxgates.reporting.html.cells import ErrorGrid
from nxgates.streams import shown

rcParams["svg.hashsalt"] = "nxgates"  # the same page for the same report: ids do not change run to run
rcParams["svg.fonttype"] = "path"  # glyphs as paths: the page needs no font to look the same everywhere
#: scatter markers on failing cells only while they are few; beyond that the red pixels alone show them
MAX_MARKERS = 64
FAIL_RED = "#d62728"


def label(text: object) -> str:
    """Outside text as matplotlib draws it: on one line, and never read as mathtext (``$...$``)."""
    return shown(str(text)).replace("$", r"\$")


def to_svg(fig: Figure) -> str:
    """The figure as an ``<svg>`` element (no XML prolog, no date), to paste into HTML."""
    FigureCanvasSVG(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def heatmap(grid: ErrorGrid) -> str:
    """Each cell's error permil of max|grad| up to twice the tolerance; failing cells red (and crossed if few)."""
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    shown = np.minimum(grid.permil, 2 * max(grid.tol_permil, 1))
    image = ax.imshow(shown, cmap="Blues", vmin=0, vmax=2 * max(grid.tol_permil, 1), aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, label=f"error permil of max|grad| (tol {grid.tol_permil})")
    if grid.failing.any():
        overlay = np.where(grid.failing, 1.0, np.nan)
        ax.imshow(overlay, cmap=ListedColormap([FAIL_RED]), vmin=0, vmax=1, aspect="auto",
                        interpolation="nearest")
        key = fig.legend(handles=[Patch(color=FAIL_RED, label=f"fails: error > {grid.tol_permil} permil")],
                         loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=9, frameon=False)
        key.set_gid("failing-cells")  # the red layer is a raster; its key names what the red means
        ys, xs = np.nonzero(grid.failing)
        if ys.size <= MAX_MARKERS:
            ax.scatter(xs, ys, marker="x", color="black", s=24, linewidths=1.2, gid="failing-markers")
    shape = "DM x R" if grid.name == "A" else "R x DM"
    title = f"{grid.name} ({shape}): {grid.failing_cells} failing cell{'s' * (grid.failing_cells != 1)}"
    br, bc = grid.block
    if (br, bc) != (1, 1):
        title += f"\nmax-pooled: each pixel is the worst of {br} x {bc} cells"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("column" if bc == 1 else f"column block ({bc} columns each)")
    ax.set_ylabel("row" if br == 1 else f"row block ({br} rows each)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return to_svg(fig)


def loss_curve(losses: Sequence[float | int | None], title: str) -> str:
    """Loss per step; steps whose loss was not finite (None in the JSON) are left as gaps."""
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    values = [np.nan if v is None else float(v) for v in losses]
    ax.plot(range(len(values)), values, marker="o", color="#1f77b4")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("loss")
    ax.set_title(label(title), fontsize=10)
    ax.grid(alpha=0.3)
    return to_svg(fig)


def bars(counts: Mapping[str, float], title: str, xlabel: str, ylabel: str, horizontal: bool = False) -> str:
    """A labelled bar chart (tasks per worker, seconds per pass, ULP buckets)."""
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    labels, values = [label(k) for k in counts], [float(v) for v in counts.values()]
    if horizontal:
        ax.barh(labels, values, color="#1f77b4")
    else:
        ax.bar(labels, values, color="#1f77b4")
        if len(labels) > 8:
            ax.tick_params(axis="x", labelrotation=60)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    return to_svg(fig)


def histogram_counts(histogram: Any) -> dict[str, float] | None:
    """A ULP histogram as bucket label -> count, from a mapping, a list of counts or of (bucket, count) pairs."""
    if isinstance(histogram, Mapping):
        items = list(histogram.items())
    elif isinstance(histogram, Sequence) and not isinstance(histogram, str):
        if all(isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 2 for v in histogram):
            items = [(k, v) for k, v in histogram]
        else:
            items = list(enumerate(histogram))
    else:
        return None
    counts = {}
    for k, v in items:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        counts[str(k)] = v
    return counts or None
