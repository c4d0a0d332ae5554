"""The lora gate's fingerprint: the loss and every cell of A and B as the tensors are shaped, the same on every
path and worker count, and a planted fault names the cell it moved."""

import pytest

from nxgates.baseline.compare import figure_lines
from nxgates.gates.lora import gate as lora
from tests.helpers import ctx

SEED = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}
NAMES = ["loss_q", *(f"{t}_{f}" for t in "AB" for f in ("analytic", "numeric", "worst_permil", "max_abs_grad"))]


def test_the_figures_are_the_reports_numbers():
    out = lora.run(ctx(SEED))
    figures = out.fingerprints
    assert list(figures) == NAMES
    assert figures["loss_q"] == out.metrics["loss_q"] == 1329684529960
    for tensor, shape in (("A", [6, 2]), ("B", [2, 6])):
        m = out.metrics[tensor]
        for kind in ("analytic", "numeric"):
            cells = figures[f"{tensor}_{kind}"]
            assert cells["shape"] == shape and cells["dtype"] == "<i8"
            assert cells["values"] == m[kind]
        assert figures[f"{tensor}_worst_permil"] == m["worst_permil"]
        assert figures[f"{tensor}_max_abs_grad"] == m["max_abs_grad"]


@pytest.mark.parametrize("params", [{"algorithm": "naive"}, {"workers": 2, "executor": "thread"}])
def test_every_path_pins_the_same_figures(params):
    assert lora.run(ctx({**SEED, **params})).fingerprints == lora.run(ctx(SEED)).fingerprints


def test_a_planted_fault_names_the_cell_it_moved_by_row_and_column():
    clean = lora.run(ctx(SEED)).fingerprints
    faulty = lora.run(ctx(SEED, fault="grad-bug")).fingerprints
    lines = list(figure_lines("lora", clean, faulty))
    before = clean["A_analytic"]["values"][0]
    after = faulty["A_analytic"]["values"][0]
    assert after != before
    assert f"lora A_analytic: 1 of 12 cells moved, first [0, 0] {before} -> {after}" in lines
    assert not [line for line in lines if line.startswith(("lora B_", "lora loss_q", "lora A_numeric"))]


def test_a_transposed_gradient_moves_b_alone():
    lines = list(figure_lines("lora", lora.run(ctx(SEED)).fingerprints,
                              lora.run(ctx(SEED, fault="transposed-b")).fingerprints))
    assert lines and all(line.startswith("lora B_") for line in lines)
    assert any(line.startswith("lora B_analytic: ") and " first [0, 1] " in line for line in lines), lines
