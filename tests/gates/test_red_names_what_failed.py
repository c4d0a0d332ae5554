"""A gate's RED line blames its subject only when one of its own core checks failed; when only an added
check failed (``--compare-grads``, the runner's ``baseline``), the line says what the core proved and names
the failing checks."""

import copy

import numpy as np
import pytest

from nxgates import registry
from nxgates.baseline import session
from nxgates.gatekit import GateOutput
from nxgates.gates import lora_train
from nxgates.gates import parallel_grad as pg
from nxgates.gates._verdict import NamedRedOutput
from nxgates.gates.lora import gate as lora
from nxgates.runner import run_gate
from tests.helpers import ctx

LORA = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast", "workers": 1,
        "executor": "auto"}
PG = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 2, "executor": "thread", "reduction": "tree"}
LORA_RED = "NX-INTFP-LORA verdict=RED 24/24 -- adapter Q-scaling bug or base W not frozen"


def entry(name):
    return registry.load(registry.PACKAGED_CONFIG).gates[name]


def moved_baseline(report):
    """A baseline document whose entry for ``report`` has its first figure moved."""
    doc_entry = session.entry_of(report)
    figures = copy.deepcopy(doc_entry["fingerprints"])
    first = next(iter(figures))
    figures[first] = figures[first] + 1 if isinstance(figures[first], int) else "moved"
    return {"entries": {session.key_of(report): {**doc_entry, "fingerprints": figures}}}


@pytest.mark.parametrize("name, head", [
    ("lora", "NX-INTFP-LORA verdict=RED 24/24 -- adapter gradients gradchecked and base W frozen; "),
    ("parallel-grad", "TA-PARALLEL-GRAD RED -- parallel per-example gradients bit-identical to serial, on >1 "
                      "worker, reproducible; "),
    ("ta-gradcheck", "TA-GRADCHECK RED 8/8 -- every autograd op and the MLP match float64 differences; "),
    ("lora-train", "NX-INTFP-LORA-TRAIN RED -- 10 integer steps train ONLY A,B: loss falls every step, base W "
                   "frozen, final adapter grads gradchecked, reproducible; "),
    ("dp-train", "DP-TRAIN RED -- data-parallel SGD bit-identical to serial SGD at every step, across worker "
                 "counts; the loss falls and the batch gradient is right; "),
])
def test_a_moved_baseline_alone_is_named_not_blamed_on_the_gate(name, head):
    e = entry(name)
    report = run_gate(e, dict(e.defaults))
    assert report.passed
    session.add_check(report, moved_baseline(report), "base.json", "fail")
    assert not report.passed
    assert report.verdict == head + "failed: baseline"


def test_lora_compare_grads_alone_names_its_check(tmp_path):
    from nxgates.core import lora as core_lora

    m = core_lora.init_model(3, 6, 2)
    dA, dB = core_lora.backward(m, core_lora.forward(m))
    dA[0, 0] += 1
    path = tmp_path / "theirs.npz"
    np.savez(path, dA=dA, dB=dB)
    out = lora.run(ctx(LORA, compare_grads=str(path)))
    assert [c.name for c in out.checks if not c.passed] == [lora.CHECK_FOREIGN]
    assert out.red == ("NX-INTFP-LORA verdict=RED 24/24 -- adapter gradients gradchecked and base W frozen; "
                       f"failed: {lora.CHECK_FOREIGN}")
    assert "Q-scaling" not in out.red


def test_lora_keeps_its_own_red_line_when_its_own_check_fails_too(tmp_path):
    out = lora.run(ctx(LORA, fault="train-base"))
    assert out.red == LORA_RED
    out.check(session.CHECK, False, "1 of 9 figures moved")
    assert out.red == LORA_RED


def test_lora_train_compare_grads_alone_names_l5(tmp_path):
    path = tmp_path / "theirs.npz"
    np.savez(path, dA=np.zeros((6, 2), np.int64), dB=np.zeros((2, 6), np.int64))
    seed = {"T": 3, "DM": 6, "R": 2, "steps": 3, "lr_q": 104858, "delta": 2097, "tol_permil": 70}
    out = lora_train.run(ctx(seed, compare_grads=str(path)))
    assert [c.name for c in out.checks if not c.passed] == [lora_train.L5]
    assert out.red.startswith("NX-INTFP-LORA-TRAIN RED -- 3 integer steps train ONLY A,B")
    assert out.red.endswith(f"; failed: {lora_train.L5}")
    assert lora_train.run(ctx(seed, fault="wrong-sign")).red == ("NX-INTFP-LORA-TRAIN RED -- the adapter training "
                                                                 "loop is wrong (see FAIL lines)")


def test_parallel_grad_t4_alone_names_t4(tmp_path):
    path = tmp_path / "g.npy"
    pg.run(ctx(PG, save_grads=str(path)))
    grads = np.load(path)
    grads[0, 0] = np.nextafter(grads[0, 0], np.float32(np.inf))
    np.save(path, grads)
    out = pg.run(ctx(PG, compare_grads=str(path)))
    assert [c.name for c in out.checks if not c.passed] == [pg.T4]
    assert out.red == ("TA-PARALLEL-GRAD RED -- parallel per-example gradients bit-identical to serial, on >1 "
                       f"worker, reproducible; failed: {pg.T4}")
    broken = pg.run(ctx(PG, compare_grads=str(path), fault="nondeterministic"))
    assert broken.red == "TA-PARALLEL-GRAD RED -- parallel training not correct (see mismatches)"


def test_a_copied_output_keeps_its_red_rule():
    """The baseline tests copy an output (copy.copy): the copy judges its own checks."""
    out = NamedRedOutput(("core",))
    out.red = "RED -- core broken"
    out.others_failed("RED", "core proven")
    out.check("core", True)
    again = copy.copy(out)
    again.items = list(out.items)
    again.check("extra", False)
    assert again.red == "RED -- core proven; failed: extra" and out.red == "RED -- core broken"
    assert isinstance(again, GateOutput)


def test_without_the_others_text_the_gates_own_line_stands():
    out = NamedRedOutput(("core",))
    out.red = "RED -- core broken"
    out.check("extra", False)
    assert out.red == "RED -- core broken"
