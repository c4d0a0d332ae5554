"""The page as a person sees it: rendered by headless Chromium, each gate's plot laid out at a real size and
drawn (its part of the screenshot is not blank). Skipped where Chromium is not installed; CI installs it."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from nxgates.reporting.html import html_text
from tests.reporting.html_runs import merged, scenarios

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (CI installs it with apt)")
WIDTH = 1200
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--disable-extensions", "--mute-audio"]
#: test-only: where each plot's SVG was laid out, and the page's height (the page itself has no script)
MEASURE = """<script>
const figures = [...document.querySelectorAll('figure.plot')].map(f => {
  const r = f.querySelector('svg').getBoundingClientRect();
  return {kind: f.dataset.plot, gate: f.dataset.gate, label: f.querySelector('svg').getAttribute('aria-label'),
          x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
});
const pre = document.createElement('pre');
pre.id = 'nx-layout';
pre.textContent = JSON.stringify({height: document.documentElement.scrollHeight, figures});
document.body.appendChild(pre);
</script>"""
#: every gate's plot a person looks at, by gate
EXPECTED = {
    "lora": {"gradcheck-A", "gradcheck-B", "ulp-histogram"},
    "ta-gradcheck": {"worst-vs-tolerance"},
    "parallel-grad": {"tasks-per-worker", "pass-times", "ulp-histogram"},
    "dp-train": {"loss", "pass-times", "worst-vs-tolerance"},
    "lora-train": {"loss", "worst-vs-tolerance"},
}


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=180, check=True)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The page of every gate's plots (green runs, a planted fault, --compare-grads), its layout and screenshot."""
    directory = tmp_path_factory.mktemp("browser")
    runs = scenarios(directory)
    report = merged(*(runs[k] for k in ("lora-transposed-b", "lora-compare", "ta-gradcheck",
                                        "parallel-grad-compare", "dp-train", "lora-train")))
    page = directory / "report.html"
    page.write_text(html_text(report), encoding="utf-8")
    measured = directory / "measured.html"
    measured.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium(f"--window-size={WIDTH},1000", "--dump-dom", measured.as_uri()).stdout
    layout = json.loads(re.search(r'<pre id="nx-layout">(.*?)</pre>', dom, re.DOTALL).group(1).replace("&amp;", "&"))
    shot = directory / "report.png"
    chromium(f"--window-size={WIDTH},{layout['height']}", f"--screenshot={shot}", page.as_uri())
    from matplotlib.image import imread

    pixels = (imread(shot)[..., :3] * 255).round().astype(np.int16)
    return layout, pixels, shot


def test_every_gates_plot_is_laid_out_at_a_readable_size(rendered):
    layout, _, _ = rendered
    kinds: dict[str, set[str]] = {}
    for f in layout["figures"]:
        kinds.setdefault(f["gate"], set()).add(f["kind"])
        assert f["w"] >= 300 and f["h"] >= 150, f  # not collapsed, not a thumbnail
        assert f["x"] >= 0 and f["x"] + f["w"] <= WIDTH + 1, f  # within the window: no sideways scrolling
        assert f["label"], f
    assert kinds == EXPECTED


def test_each_plot_is_drawn_in_the_screenshot(rendered):
    layout, pixels, shot = rendered
    assert pixels.shape[1] == WIDTH and pixels.shape[0] >= layout["height"] - 1, shot
    for f in layout["figures"]:
        x, y, w, h = (int(round(f[k])) for k in ("x", "y", "w", "h"))
        crop = pixels[y:y + h, x:x + w]
        assert crop.shape[:2] == (h, w), f
        ink = np.any(crop < 230, axis=-1)  # anything darker than the page's near-white
        colours = len(np.unique(crop.reshape(-1, 3), axis=0))
        assert ink.mean() > 0.02 and colours > 8, (f, ink.mean(), colours, shot)


def test_failing_cells_and_bars_are_red_on_screen(rendered):
    layout, pixels, _ = rendered
    red = np.all(np.abs(pixels - (214, 39, 40)) <= 2, axis=-1)  # plots.FAIL_RED
    counts: dict[str, list[int]] = {}
    for f in layout["figures"]:
        x, y, w, h = (int(round(f[k])) for k in ("x", "y", "w", "h"))
        counts.setdefault(f["kind"], []).append(int(np.count_nonzero(red[y:y + h, x:x + w])))
    assert max(counts["gradcheck-B"]) > 2000  # transposed-b: nearly all of B red
    assert min(counts["gradcheck-A"]) < 2000  # green A: only the colour bar's mark of the tolerance
    assert min(counts["ulp-histogram"]) > 100  # the differing cells' bars
