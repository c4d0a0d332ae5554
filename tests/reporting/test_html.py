"""``--html PATH``: a self-contained page (well-formed, nothing from the network), every plot an inline SVG,
the gradcheck's failing cells marked, bounded at xl, and exit 2 with the install line without matplotlib.
Each gate's plots are tested in test_html_plots.py, the page in a browser in test_html_browser.py."""

import re
import sys
from html.parser import HTMLParser

import numpy as np

from nxgates.reporting.html import INSTALL_LINE, cells, html_text

#: elements HTML never closes
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "embed", "source", "wbr"}
URL = re.compile(r"https?://", re.IGNORECASE)


class PageParser(HTMLParser):
    """Checks the tags nest and close, and collects every URL a browser would fetch (src, href, url())."""

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.fetched: list[str] = []
        self.figures: list[dict[str, str | None]] = []
        self.svgs = 0
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        for key in ("src", "href", "xlink:href", "style"):
            if values.get(key) and (key != "style" or "url(" in values[key]):
                self.fetched.append(values[key])
        if tag == "figure":
            self.figures.append(values)
        if tag == "svg":
            self.svgs += 1
        self.in_style = tag == "style"
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()
        self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self.fetched += re.findall(r"url\(([^)]*)\)", data)


def parse(text: str) -> PageParser:
    page = PageParser()
    page.feed(text)
    page.close()
    assert page.problems == [] and page.stack == [], (page.problems, page.stack)
    assert [u for u in page.fetched if URL.search(u) or not u.startswith(("#", "data:"))] == []
    assert "<script" not in text.lower() and "@import" not in text
    return page


def plots(page: PageParser, gate: str | None = None) -> dict[str, dict]:
    """The page's figures by kind (of one gate's, when named)."""
    return {f["data-plot"]: f for f in page.figures if f.get("data-plot") and gate in (None, f.get("data-gate"))}


def lora_gate(dm: int, r: int, bad_a: tuple[int, ...] = (), tol: int = 70) -> dict:
    """A lora gate's JSON item with exact gradients, then cells of A made ``2 * tol`` permil wrong."""
    def tensor(n, bad):
        rng = np.random.default_rng(n)
        ana = rng.integers(-1000, 1000, n)
        ana[0] = 1000
        num = ana.copy()
        num[list(bad)] += 2 * tol
        return {"analytic": ana.tolist(), "numeric": num.tolist(), "max_abs_grad": 1000}

    return {"name": "lora", "passed": not bad_a, "seconds": 1.0, "fault": None, "error": None,
            "params": {"T": 3, "DM": dm, "R": r, "tol_permil": tol},
            "checks": [{"name": "gradcheck A (lora)", "passed": not bad_a, "detail": "d"}],
            "metrics": {"A": tensor(dm * r, bad_a), "B": tensor(r * dm, ())}}


def doc(*gates: dict) -> dict:
    return {"nxgates": "0.1.0", "passed": all(g["passed"] for g in gates), "gates": list(gates),
            "environment": {"python": "3", "gates": [{"name": g["name"], "workers": 1} for g in gates]}}


def test_error_permil_is_the_gates_rel(invoke, tmp_path):
    import json

    assert invoke("run", "lora", "--inject", "missing-rescale", "--json", "r.json").exit_code == 1
    gate = json.loads((tmp_path / "r.json").read_text())["gates"][0]
    for key, tensor in (("A", gate["metrics"]["A"]), ("B", gate["metrics"]["B"])):
        permil = cells.error_permil(tensor)
        assert int(permil.max()) == tensor["worst_permil"], key
        assert int(np.count_nonzero(permil <= 70)) == tensor["cells_passed"], key


def test_max_pool_keeps_a_single_bad_cell():
    grid = np.zeros((1024, 16), dtype=np.int64)
    grid[777, 5] = 500
    pooled, block = cells.max_pool(grid)
    assert pooled.shape == (256, 16) and block == (4, 1)
    assert pooled[777 // 4, 5] == 500 and np.count_nonzero(pooled) == 1
    same, unpooled = cells.max_pool(np.ones((6, 2), dtype=np.int64))
    assert unpooled == (1, 1) and same.shape == (6, 2)


def test_a_planted_fault_is_marked_in_the_heatmap(invoke, tmp_path):
    r = invoke("run", "lora", "--inject", "transposed-b", "--html", "r.html")
    assert r.exit_code == 1
    text = (tmp_path / "r.html").read_text()
    page = parse(text)
    shown = plots(page)
    assert shown["gradcheck-A"]["data-failing-cells"] == "0"
    assert int(shown["gradcheck-B"]["data-failing-cells"]) > 0
    assert len(page.figures) == 2 and text.count('id="failing-cells"') == 1  # the red key, on B only
    assert "transposed-b" in text and '<span class="fail">FAIL</span>' in text


def test_a_green_lora_page_marks_nothing(invoke, tmp_path):
    assert invoke("run", "lora", "--html", "r.html").exit_code == 0
    text = (tmp_path / "r.html").read_text()
    shown = plots(parse(text))
    assert shown["gradcheck-A"]["data-failing-cells"] == shown["gradcheck-B"]["data-failing-cells"] == "0"
    assert 'id="failing-cells"' not in text and "PASSED" in text


def test_training_and_pool_gates_plot_loss_tasks_and_times(invoke, tmp_path):
    r = invoke("run", "lora-train", "parallel-grad", "--html", "r.html", "-q")
    assert r.exit_code == 0, r.output
    page = parse((tmp_path / "r.html").read_text())
    kinds = {gate: [f["data-plot"] for f in page.figures if f["data-gate"] == gate]
             for gate in ("lora-train", "parallel-grad")}
    assert kinds == {"lora-train": ["loss", "worst-vs-tolerance"], "parallel-grad": ["tasks-per-worker", "pass-times"]}


def test_the_ulp_histogram_of_compare_grads_is_plotted(invoke, tmp_path):
    """What parallel-grad writes (``compare_grads.histogram``) is what the page draws, cells apart included."""
    import json

    assert invoke("run", "parallel-grad", "-q", "--save-grads", "g.npy").exit_code == 0
    grads = np.load(tmp_path / "g.npy")
    grads.flat[5] = np.nextafter(grads.flat[5], np.float32(np.inf))  # one cell 1 ULP off
    grads.flat[7] = -grads.flat[7] if grads.flat[7] else np.float32(1)  # one cell of the opposite sign
    np.save(tmp_path / "moved.npy", grads)
    r = invoke("run", "parallel-grad", "-q", "--compare-grads", "moved.npy", "--html", "r.html", "--json", "r.json")
    assert r.exit_code == 1, r.output
    compared = json.loads((tmp_path / "r.json").read_text())["gates"][0]["metrics"]["compare_grads"]
    assert compared["histogram"]["1"] >= 1
    page = parse((tmp_path / "r.html").read_text())
    assert "ulp-histogram" in plots(page)
    from nxgates.reporting.html.compared import histogram

    bars = histogram(compared).counts
    assert list(bars)[:len(compared["histogram"])] == list(compared["histogram"])
    assert sum(bars.values()) == sum(compared["tensors"][t]["cells"] for t in compared["tensors"])


def test_no_ulp_histogram_without_compare_grads(invoke, tmp_path):
    assert invoke("run", "parallel-grad", "-q", "--html", "r.html").exit_code == 0
    assert "ulp-histogram" not in plots(parse((tmp_path / "r.html").read_text()))


def test_at_xl_heatmaps_are_pooled_said_so_and_the_page_stays_small():
    text = html_text(doc(lora_gate(1024, 16, bad_a=(12345,))))
    shown = plots(parse(text))
    assert shown["gradcheck-A"]["data-failing-cells"] == "1"
    assert "max-pooled by 4 x 1 cells" in text and "max-pooled by 1 x 4 cells" in text
    assert "[1024x16]" in text and "[16x1024]" in text  # the cells themselves are in --json: a shape and a line
    assert len(text) < 400_000


def test_page_text_is_escaped():
    gate = lora_gate(2, 1)
    gate["checks"][0]["detail"] = "<script>alert(1)</script> & more"
    text = html_text(doc(gate))
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_without_matplotlib_html_is_exit_2_with_the_install_line(invoke, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec then reports it missing
    r = invoke("run", "lora", "--html", "r.html")
    assert r.exit_code == 2
    assert INSTALL_LINE in r.output and "PASS" not in r.output
    assert not (tmp_path / "r.html").exists()


def test_html_into_a_missing_directory_is_exit_2(invoke, tmp_path):
    r = invoke("run", "lora", "--html", str(tmp_path / "nope" / "r.html"))
    assert r.exit_code == 2 and "--html" in r.output


def test_pinned_figures_are_shown_by_their_digest_not_as_records(invoke, tmp_path):
    import json

    assert invoke("run", "lora", "--json", "r.json").exit_code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    record = report["gates"][0]["fingerprints"]["A_analytic"]
    page = html_text(report)
    parse(page)
    assert "Pinned figures" in page and f"sha256 <code>{record['sha256'][:16]}...</code>" in page
    assert "'blocks'" not in page and "1329684529960" in page  # no raw record; the pinned loss as is


def test_a_gate_that_errs_leads_the_page_with_its_error():
    crashed = {"name": "dp-train", "passed": False, "seconds": 2.0, "fault": None, "params": {"B": 8},
               "error": "timed out after 2 s <at step 3>", "checks": [], "metrics": {}}
    text = html_text(doc(lora_gate(6, 2), crashed))
    parse(text)
    led = text[text.index('id="failures"'):text.index("<section")]
    assert "dp-train: error" in led and "timed out after 2 s &lt;at step 3&gt;" in led
    assert "<i>error</i>" in text  # its row in the gate table says so
    assert "This gate's metrics have nothing to plot." in text
