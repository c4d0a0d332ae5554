"""The lora-train gate: the exact integers of a plain Python-int training loop, and every check red by its fault."""

import hashlib

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.errors import ResourceError
from nxgates.gatekit import Progress, RunContext
from nxgates.gates import lora_train
from tests.helpers import ctx
from tests.oracles.seed_lora_train import seed_lora_train

SEED = {"T": 3, "DM": 6, "R": 2, "steps": 10, "lr_q": 104858, "delta": 2097, "tol_permil": 70}


def by_name(out):
    return {c.name: c.passed for c in out.checks}


def red(out):
    return {name for name, ok in by_name(out).items() if not ok}


@pytest.mark.parametrize("T,DM,R,steps,lr_q", [(3, 6, 2, 10, 104858), (5, 7, 3, 4, 52429), (1, 1, 1, 3, 300000),
                                               (4, 11, 5, 6, 7001), (2, 9, 9, 2, 99999), (3, 6, 2, 10, 838861)])
def test_every_integer_equals_the_python_int_training_loop(T, DM, R, steps, lr_q):
    params = {**SEED, "T": T, "DM": DM, "R": R, "steps": steps, "lr_q": lr_q}
    m = lora_train.run(ctx(params)).metrics
    ref = seed_lora_train(T, DM, R, steps, lr_q)
    assert m["losses"] == ref["losses"] and 2 <= len(m["losses"]) <= steps + 1
    assert m["A"] == ref["A"] and m["B"] == ref["B"]
    assert m["final_worst_permil"] == ref["final_worst_permil"]
    # the reference's W stayed put too
    assert ref["W"] == [int(v) for v in core_lora.init_model(T, DM, R).W.reshape(-1)]


def test_seed_size_is_green_and_starts_at_the_lora_seeds_loss():
    out = lora_train.run(ctx(SEED))
    assert by_name(out) == dict.fromkeys(lora_train.GATE.checks[:4], True)  # L5 only with --compare-grads
    assert lora_train.GATE.checks[4] == lora_train.L5
    losses = out.metrics["losses"]
    assert losses[0] == 1329684529960  # the lora seed's L_q32: step 0 is the seed's forward
    assert all(losses[s] < losses[s - 1] for s in range(1, len(losses)))
    a = np.array(out.metrics["A"], dtype="<i8").tobytes()
    assert out.metrics["A_sha256"] == hashlib.sha256(a).hexdigest()
    lines = [getattr(i, "text", "") for i in out.items]
    assert " step 0: L_q32=1329684529960" in lines
    assert sum(t.startswith(" step ") for t in lines) == 11


@pytest.mark.parametrize("fault, red", [("train-base", {lora_train.L2}), ("wrong-sign", {lora_train.L1}),
                                        ("stale-grad", {lora_train.L3}), ("carry-state", {lora_train.L4})])
def test_each_fault_turns_exactly_its_check_red(fault, red):
    out = lora_train.run(ctx(SEED, fault=fault))
    assert {name for name, ok in by_name(out).items() if not ok} == red


def test_a_loss_that_stops_falling_ends_training_at_that_step():
    out = lora_train.run(ctx(SEED, fault="wrong-sign"))
    losses = out.metrics["losses"]
    assert len(losses) == 2 and losses[1] > losses[0]
    assert "loss did not fall at step 1" in next(c.detail for c in out.checks if c.name == lora_train.L1)


@pytest.mark.parametrize("preset", ["medium", "large"])
def test_wrong_sign_is_caught_by_l1_at_the_big_presets_too(preset):
    """Ascent would run the integers into the int64 guard (exit 2) within a few steps; L1 stops it first."""
    from nxgates import registry

    entry = registry.load(registry.PACKAGED_CONFIG).resolve("lora-train")
    out = lora_train.run(ctx({**entry.defaults, **entry.presets[preset]}, fault="wrong-sign"))
    assert red(out) == {lora_train.L1}


def test_stale_grad_is_caught_by_the_gradcheck_not_by_the_loss():
    """At the seed size the loss still falls with a stale dB: only L3 (gradcheck of what the loop uses) sees it."""
    out = lora_train.run(ctx(SEED, fault="stale-grad"))
    assert by_name(out)[lora_train.L1] is True
    assert out.metrics["final_worst_permil"]["B"] > SEED["tol_permil"] >= out.metrics["final_worst_permil"]["A"]


def test_trainer_updates_only_the_adapter_and_from_the_same_step():
    m = core_lora.init_model(3, 6, 2)
    trainer = lora_train.Trainer(m, 104858)
    f = trainer.forward()
    dA, dB = core_lora.backward(m, f)
    A0, B0, W0 = m.A.copy(), m.B.copy(), m.W.copy()
    trainer.step(f)
    assert np.array_equal(m.W, W0)
    assert np.array_equal(m.A, A0 - q20.tdiv(dA * 104858, q20.S))
    assert np.array_equal(m.B, B0 - q20.tdiv(dB * 104858, q20.S))


def test_presets_are_green():
    from nxgates import registry

    entry = registry.load(registry.PACKAGED_CONFIG).resolve("lora-train")
    for name in ("medium", "large"):
        out = lora_train.run(ctx({**entry.defaults, **entry.presets[name]}))
        assert all(by_name(out).values()), (name, by_name(out))


def test_final_adapter_lists_stop_above_4096_cells():
    at_limit = lora_train.run(ctx({**SEED, "T": 1, "DM": 256, "R": 8, "steps": 1, "lr_q": 1}))
    assert len(at_limit.metrics["A"]) == len(at_limit.metrics["B"]) == 2048
    above = lora_train.run(ctx({**SEED, "T": 1, "DM": 257, "R": 8, "steps": 1, "lr_q": 1}))
    assert "A" not in above.metrics and len(above.metrics["A_sha256"]) == 64


def test_a_learning_rate_that_would_wrap_int64_is_refused():
    with pytest.raises(ResourceError, match=r"lora-train at T=3 DM=6 R=2 steps=10 lr_q=1099511627776 .*overflow"):
        lora_train.run(ctx({**SEED, "lr_q": 1 << 40}))


class UnitsProgress(Progress):
    """Every unit of work the gate starts: [label, total, steps advanced until the next start]."""

    def __init__(self):
        self.units = []

    def start(self, label, total):
        self.units.append([label, total, 0])

    def advance(self, steps=1):
        self.units[-1][2] += steps


@pytest.mark.parametrize("T,DM,R", [(3, 6, 2), (2, 9, 4)])
def test_every_progress_bar_ends_full(T, DM, R):
    """Each unit's total is the steps that advance it: a bar that stops short (or overflows) misleads."""
    progress = UnitsProgress()
    out = lora_train.run(RunContext(params={**SEED, "T": T, "DM": DM, "R": R}, progress=progress))
    assert out.checks and all(c.passed for c in out.checks)
    assert [(label, total) for label, total, _ in progress.units] == [
        ("training steps", SEED["steps"]), ("gradcheck cells", 2 * DM * R), ("training steps", SEED["steps"])]
    assert [done for _, _, done in progress.units] == [total for _, total, _ in progress.units]
