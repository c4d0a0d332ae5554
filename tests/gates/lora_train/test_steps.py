"""lora-train step by step: the trainer's update, the runs it compares, and every line the gate prints."""

import hashlib

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.errors import ConfigError, ResourceError
from nxgates.gatekit import Check, Line, RunContext
from nxgates.gates import lora_train
from tests.helpers import Units, ctx

SEED = {"T": 3, "DM": 6, "R": 2, "steps": 3, "lr_q": 104858, "delta": 2097, "tol_permil": 70}
HEADER = ("=== nx_intfp_lora_train: train ONLY the LoRA adapter (rank 2) in Q20 INTEGER, no float: 3 steps of "
          "A -= (lr_q * dA) / S, lr_q=104858 ===")


def shown(out):
    """Lines as (level, text) and checks as (name, passed, detail)."""
    return [(i.level, i.text) if isinstance(i, Line) else (i.name, i.passed, i.detail) for i in out.items]


def test_the_seed_run_prints_every_step_and_check():
    out = lora_train.run(ctx(SEED))
    assert shown(out) == [
        ("info", HEADER),
        ("info", " step 0: L_q32=1329684529960"),
        ("info", " step 1: L_q32=1261405785129 (delta -68278744831)"),
        ("info", " step 2: L_q32=1199996022232 (delta -61409762897)"),
        ("info", " step 3: L_q32=1137553987308 (delta -62442034924)"),
        (lora_train.L1, True, "1329684529960 -> 1137553987308 over 3 steps"),
        (lora_train.L2, True, "W bit-identical (36 cells)"),
        ("info", " final A (lora): 12/12 (worst=2permil of max|grad|=188429)"),
        ("info", " final B (lora): 12/12 (worst=0permil of max|grad|=390029)"),
        (lora_train.L3, True, "A (lora) 12/12 (worst=2permil), B (lora) 12/12 (worst=0permil)"),
        (lora_train.L4, True, "A sha256 8fe51b883070bf95, B sha256 9290729d9d342b5f both runs"),
    ]
    assert out.metrics == {
        "losses": [1329684529960, 1261405785129, 1199996022232, 1137553987308], "steps": 3, "lr_q": 104858,
        "A_sha256": "8fe51b883070bf95db204e784bf91d451043318729be1b4de10a973313569ac0",
        "B_sha256": "9290729d9d342b5fe588c47d6afd20c0206d34222adbf1e8db45f6e9ad96864d",
        "trained_params": 24, "w_changed_cells": 0, "final_worst_permil": {"A": 2, "B": 0},
        "A": [-226625, 227684, -62281, -367316, 169283, -103928, 333627, 21968, -155706, 285356, -41842, -225850],
        "B": [-246558, 63101, 215159, -251927, -75229, 122772, 293938, -284985, -64597, 20796, 281007, -291760]}
    assert out.digest == "3ec822c06f6750b57e868990f3fa00515cacb0c8a362ffbb2d3f9b60ac7c42e3"
    assert out.green == ("NX-INTFP-LORA-TRAIN GREEN -- 3 integer steps train ONLY A,B: loss falls every step, "
                         "base W frozen, final adapter grads gradchecked, reproducible.")
    assert out.red == "NX-INTFP-LORA-TRAIN RED -- the adapter training loop is wrong (see FAIL lines)"


def test_the_digest_hashes_the_losses_then_both_adapter_digests():
    out = lora_train.run(ctx(SEED))
    m = out.metrics
    h = hashlib.sha256(" ".join(map(str, m["losses"])).encode() + (m["A_sha256"] + m["B_sha256"]).encode())
    assert out.digest == h.hexdigest()


def test_a_rising_loss_fails_l1_at_its_step_and_stops_training():
    out = lora_train.run(ctx(SEED, fault="wrong-sign"))
    assert shown(out)[1:4] == [
        ("info", " step 0: L_q32=1329684529960"),
        ("info", " step 1: L_q32=1404288204718 (delta 74603674758)"),
        (lora_train.L1, False, "loss did not fall at step 1 (1329684529960 -> 1404288204718); training stopped there"),
    ]
    assert out.metrics["losses"] == [1329684529960, 1404288204718]


def test_a_trained_base_fails_l2_with_the_cells_that_moved():
    out = lora_train.run(ctx(SEED, fault="train-base"))
    assert (lora_train.L2, False, "36 of 36 cells of W changed during training") in shown(out)
    assert out.metrics["w_changed_cells"] == 36
    assert out.metrics["losses"] == [1329684529960, 806251530006, 509016674949, 333808288867]


def test_a_stale_gradient_fails_l3_naming_the_failing_cells_and_the_stale_tensor():
    out = lora_train.run(ctx({**SEED, "tol_permil": 60}, fault="stale-grad"))
    assert shown(out)[7:12] == [
        ("info", " final A (lora): 12/12 (worst=1permil of max|grad|=185005)"),
        ("detail", " B (lora) cell 5 ana=-152982 num=-127677 rel=68"),
        ("detail", " B (lora) cell 10 ana=168870 num=191575 rel=61"),
        ("info", " final B (lora): 10/12 (worst=68permil of max|grad|=371238)"),
        (lora_train.L3, False, "A (lora) 12/12 (worst=1permil), B (lora) 10/12 (worst=68permil); "
                               "the loop's dB is not the backward's at the final weights"),
    ]


def test_at_most_sixteen_failing_cells_are_listed_per_tensor():
    """Tolerance 0 with the previous dB: all 48 cells of B fail."""
    out = lora_train.run(ctx({**SEED, "DM": 12, "R": 4, "tol_permil": 0, "steps": 1}, fault="stale-grad"))
    cells = [text for level, text, *_ in shown(out) if level == "detail"]
    assert len([c for c in cells if c.startswith(" B (lora) cell ")]) == 16
    assert " final B (lora): 0/48 (worst=353permil of max|grad|=2841897)" in [t for _, t, *_ in shown(out)]


def test_a_resumed_second_run_fails_l4_where_the_runs_part():
    out = lora_train.run(ctx(SEED, fault="carry-state"))
    assert shown(out)[-1] == (
        lora_train.L4, False,
        "run 1 vs run 2: first part at step 0, A[0, 0] -262144 vs -226625; run 2 ended at A 932cecde2a7bfd16 "
        "B c8eb266547470a14, run 1 at A 8fe51b883070bf95 B 9290729d9d342b5f")


def test_an_overflow_is_a_resource_error_naming_the_run():
    with pytest.raises(ResourceError) as e:
        lora_train.run(ctx({**SEED, "lr_q": 1 << 40}))
    assert str(e.value).startswith("lora-train at T=3 DM=6 R=2 steps=3 lr_q=1099511627776 delta=2097: ")
    assert str(e.value).endswith("; use a smaller lr_q, steps or sizes")
    assert e.value.__cause__ is None and e.value.__suppress_context__


# ---- the trainer ----------------------------------------------------------------------------------------


def test_the_trainer_starts_from_the_frozen_products_forward():
    m = core_lora.init_model(3, 6, 2)
    trainer = lora_train.Trainer(m, 5)
    assert trainer.lr_q == 5 and trainer.fault is None and trainer._previous_dB is None
    assert np.array_equal(trainer.xw, q20.matmul(m.x, m.W, "x@W"))
    assert trainer.forward().loss == core_lora.forward(m, trainer.xw).loss == 1329684529960


def test_a_stale_gradient_is_the_previous_steps_db_and_a_fresh_one_at_the_first_step():
    m = core_lora.init_model(3, 6, 2)
    trainer = lora_train.Trainer(m, 104858, "stale-grad")
    f0 = trainer.forward()
    dA0, dB0 = core_lora.backward(m, f0)
    used = trainer.gradients(f0)
    assert np.array_equal(used[0], dA0) and np.array_equal(used[1], dB0)
    trainer.step(f0)
    f1 = trainer.forward()
    dA1, dB1 = core_lora.backward(m, f1)
    used = trainer.gradients(f1)
    assert np.array_equal(used[0], dA1) and np.array_equal(used[1], trainer_prev := dB0), trainer_prev
    assert np.array_equal(trainer._previous_dB, dB1)


def test_gradient_ascent_moves_the_adapter_up_its_gradients():
    m = core_lora.init_model(3, 6, 2)
    trainer = lora_train.Trainer(m, 104858, "wrong-sign")
    f = trainer.forward()
    dA, dB = core_lora.backward(m, f)
    A0, B0 = m.A.copy(), m.B.copy()
    trainer.step(f)
    assert np.array_equal(m.A, A0 + q20.tdiv(dA * 104858, q20.S))
    assert np.array_equal(m.B, B0 + q20.tdiv(dB * 104858, q20.S))


def test_training_the_base_moves_w_down_its_own_gradient_and_refreshes_x_at_w():
    m = core_lora.init_model(3, 6, 2)
    trainer = lora_train.Trainer(m, 104858, "train-base")
    f = trainer.forward()
    dA, dB = core_lora.backward(m, f)
    W0, A0, B0 = m.W.copy(), m.A.copy(), m.B.copy()
    dW = q20.matmul_per_term(m.x.T, q20.mul(f.y, 2, "dy"), "dW")
    trainer.step(f)
    assert np.array_equal(m.W, W0 - q20.tdiv(dW * 104858, q20.S))
    assert np.array_equal(trainer.xw, q20.matmul(m.x, m.W, "x@W"))
    assert np.array_equal(m.A, A0 - q20.tdiv(dA * 104858, q20.S))
    assert np.array_equal(m.B, B0 - q20.tdiv(dB * 104858, q20.S))


def test_a_training_keeps_the_adapter_of_every_step_and_the_final_gradients():
    run = lora_train.train(3, 6, 2, 2, 104858, ctx(SEED))
    assert run.losses == [1329684529960, 1261405785129, 1199996022232]
    assert run.A_steps.shape == (3, 6, 2) and run.B_steps.shape == (3, 2, 6)
    start = core_lora.init_model(3, 6, 2)
    assert np.array_equal(run.A_steps[0], start.A) and np.array_equal(run.B_steps[0], start.B)
    assert np.array_equal(run.A_steps[2], run.model.A) and np.array_equal(run.B_steps[2], run.model.B)
    assert np.array_equal(run.w_init, start.W) and run.final.loss == run.losses[-1]
    dA, dB = core_lora.backward(run.model, run.final)
    assert np.array_equal(run.dA, dA) and np.array_equal(run.dB, dB)


def test_the_adapter_digest_is_sha256_of_little_endian_int64_rows():
    run = lora_train.train(3, 6, 2, 1, 104858, ctx(SEED))
    A, B = run.model.A, run.model.B
    assert run.adapter_digest() == (hashlib.sha256(A.astype("<i8").tobytes()).hexdigest(),
                                    hashlib.sha256(B.astype("<i8").tobytes()).hexdigest())
    run.model.A = np.asfortranarray(A.astype(">i8"))
    assert run.adapter_digest()[0] == hashlib.sha256(A.astype("<i8").tobytes()).hexdigest()


def test_a_carried_adapter_is_remembered_and_resumed():
    carried = {}
    first = lora_train.train(3, 6, 2, 2, 104858, ctx(SEED), "carry-state", carried)
    assert np.array_equal(carried["A"], first.model.A) and np.array_equal(carried["B"], first.model.B)
    assert carried["A"] is not first.model.A
    second = lora_train.train(3, 6, 2, 2, 104858, ctx(SEED), "carry-state", carried)
    assert np.array_equal(second.A_steps[0], first.model.A) and np.array_equal(second.B_steps[0], first.model.B)
    assert second.losses[0] == first.losses[-1]
    assert not np.array_equal(carried["A"], first.model.A)


def test_without_memory_every_run_starts_from_the_seed():
    run = lora_train.train(3, 6, 2, 1, 104858, ctx(SEED), "carry-state", None)
    assert run.losses[0] == 1329684529960


# ---- where two runs part --------------------------------------------------------------------------------


def a_training(losses, A_steps, B_steps):
    A_steps, B_steps = np.array(A_steps, np.int64), np.array(B_steps, np.int64)
    return lora_train.Training(None, None, losses, None, None, None, A_steps, B_steps)


A = [[[1, 2], [3, 4]]] * 3
B = [[[5, 6, 7]]] * 3


def test_runs_that_agree_report_how_far_each_went():
    assert lora_train.where_runs_part(a_training([9, 8, 7], A, B), a_training([9, 8], A[:2], B[:2])) == (
        "run 1 ran 2 steps, run 2 1")


def test_runs_part_at_the_first_step_then_in_a_before_b_row_major():
    A2 = [A[0], [[1, 2], [3, 4]], [[1, 0], [0, 4]]]
    B2 = [B[0], [[5, -6, 7]], B[0]]
    assert lora_train.where_runs_part(a_training([9, 8, 7], A, B), a_training([9, 8, 7], A2, B2)) == (
        "run 1 vs run 2: first part at step 1, B[0, 1] 6 vs -6")
    A3 = [A[0], A[0], [[1, 2], [0, 9]]]
    assert lora_train.where_runs_part(a_training([9, 8, 7], A, B), a_training([9, 8, 7], A3, B)) == (
        "run 1 vs run 2: first part at step 2, A[1, 0] 3 vs 0")


# ---- the memory it asks for -----------------------------------------------------------------------------


def test_validation_asks_for_both_runs_adapters_at_every_step(monkeypatch):
    asked = []
    monkeypatch.setattr(lora_train, "require", lambda nbytes, what: asked.append((nbytes, what)))
    lora_train.validate({**SEED, "DM": 7, "R": 3, "steps": 4})
    assert asked == [(8 * 2 * 2 * 5 * 2 * 7 * 3, "lora-train at DM=7 R=3 steps=4")]


def test_validation_refuses_a_rank_above_the_width():
    with pytest.raises(ConfigError, match=r"^R=7 must not exceed DM=6 "):
        lora_train.validate({**SEED, "R": 7})


def test_the_gate_checks_five_things_one_of_them_optional():
    assert lora_train.GATE.checks == (lora_train.L1, lora_train.L2, lora_train.L3, lora_train.L4, lora_train.L5)
    assert lora_train.GATE.optional_checks == (lora_train.L5,)
    assert [Check(c, True).name for c in lora_train.GATE.checks][4] == "L5 final dA, dB EXACT vs the given file"


def test_training_starts_from_given_arrays_and_leaves_them_untouched():
    seed = core_lora.init_model(3, 6, 2)
    arrays = {"x": seed.x, "W": seed.W, "A": seed.A // 2, "B": seed.B}
    run = lora_train.train(3, 6, 2, 1, 104858, ctx(SEED, inputs=arrays), "train-base")
    assert np.array_equal(run.A_steps[0], seed.A // 2) and run.losses[0] != 1329684529960
    assert np.array_equal(arrays["W"], seed.W) and not np.array_equal(run.model.W, seed.W)


def test_a_cell_at_exactly_the_tolerance_passes_and_is_not_listed():
    out = lora_train.run(ctx({**SEED, "tol_permil": 2}))
    assert " final A (lora): 12/12 (worst=2permil of max|grad|=188429)" in [t for _, t, *_ in shown(out)]
    assert [t for level, t, *_ in shown(out) if level == "detail"] == [] and out.checks[2].passed


def test_progress_names_each_training_and_the_gradcheck():
    units = Units()
    lora_train.run(RunContext(params=dict(SEED), progress=units))
    assert units.units == [["training steps", 3, 3], ["gradcheck cells", 24, 24], ["training steps", 3, 3]]


def test_a_loss_that_stays_equal_counts_as_not_falling():
    """lr_q=1 moves no cell (every |lr_q * grad| < S), so the loss repeats and training stops at step 1."""
    out = lora_train.run(ctx({**SEED, "lr_q": 1}))
    assert out.metrics["losses"] == [1329684529960, 1329684529960]
    assert out.checks[0] == (lora_train.L1, False, "loss did not fall at step 1 (1329684529960 -> 1329684529960); "
                                                   "training stopped there", out.checks[0].seconds)


def test_a_loss_that_stops_falling_later_names_its_own_step_and_losses():
    out = lora_train.run(ctx({**SEED, "lr_q": 1000000}))
    assert out.metrics["losses"] == [1329684529960, 907404503075, 1035403031706]
    assert out.checks[0].detail == "loss did not fall at step 2 (907404503075 -> 1035403031706); training stopped there"


def test_a_gradcheck_that_fails_fails_l3_though_no_gradient_is_stale():
    """Tolerance 1 permil is below A's worst cell (2 permil): the gradcheck alone must turn L3 red."""
    out = lora_train.run(ctx({**SEED, "tol_permil": 1}))
    assert out.checks[2] == (lora_train.L3, False, "A (lora) 11/12 (worst=2permil), B (lora) 12/12 (worst=0permil)",
                             out.checks[2].seconds)


def test_every_stale_gradient_is_named(monkeypatch):
    class BothStale(lora_train.Trainer):
        def gradients(self, f):
            dA, dB = super().gradients(f)
            return dA + 1, dB + 1

    monkeypatch.setattr(lora_train, "Trainer", BothStale)
    out = lora_train.run(ctx(SEED))
    assert out.checks[2].detail.endswith("; the loop's dA is not the backward's at the final weights"
                                         "; the loop's dB is not the backward's at the final weights")


def test_each_checked_computation_of_a_step_names_itself_for_the_overflow_message(monkeypatch):
    """An int64 guard that trips says where (``Q20Overflow.what``): x@W, and under train-base W's own update.

    With the limit at 0 every guard goes on to its exact check, which here records the name instead of raising.
    """
    named = []
    monkeypatch.setattr(q20, "LIMIT", 0)
    monkeypatch.setattr(q20, "check_bound", lambda bound, what, limit=None: named.append(what))
    trainer = lora_train.Trainer(core_lora.init_model(3, 6, 2), 104858, "train-base")
    assert named == ["x@W"]
    f = trainer.forward()
    named.clear()
    trainer.step(f)
    assert named == ["dy = 2y", "dB = h^T dy", "dh = dy B^T", "dA = x^T dh",  # the backward's, then W's own
                     "dy = 2y", "dW = x^T dy", "W: lr_q * grad", "W: update", "x@W",
                     "A: lr_q * grad", "A: update", "B: lr_q * grad", "B: update"]
