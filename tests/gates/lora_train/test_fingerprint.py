"""The lora-train gate keeps the adapter at every step: its fingerprint holds every loss and every step's
A and B, and L4's FAIL line names the first step and cell where the two runs part, with both integers."""

import numpy as np

from nxgates.core import lora as core_lora
from nxgates.gates import lora_train
from nxgates.gates.lora_train import Training, where_runs_part
from tests.helpers import ctx

SEED = {"T": 3, "DM": 6, "R": 2, "steps": 10, "lr_q": 104858, "delta": 2097, "tol_permil": 70}


def test_the_figures_are_every_steps_loss_and_adapter():
    out = lora_train.run(ctx(SEED))
    figures = out.fingerprints
    assert list(figures) == ["losses", "A_steps", "B_steps", "A_final_worst_permil", "B_final_worst_permil"]
    assert figures["losses"]["values"] == out.metrics["losses"] and figures["losses"]["shape"] == [11]
    assert figures["A_steps"]["shape"] == [11, 6, 2] and figures["B_steps"]["shape"] == [11, 2, 6]
    start = core_lora.init_model(3, 6, 2)
    assert figures["A_steps"]["values"][:12] == start.A.reshape(-1).tolist()  # step 0: where training starts
    assert figures["B_steps"]["values"][:12] == start.B.reshape(-1).tolist()
    assert figures["A_steps"]["values"][-12:] == out.metrics["A"]  # step 10: the trained adapter
    assert figures["B_steps"]["values"][-12:] == out.metrics["B"]
    assert [figures[f"{t}_final_worst_permil"] for t in "AB"] == list(out.metrics["final_worst_permil"].values())


def test_carry_state_fails_l4_naming_step_0_and_the_first_cell():
    """The second run resumes the first's adapter: the runs part before the first update, at A[0, 0]."""
    clean = lora_train.run(ctx(SEED)).metrics
    out = lora_train.run(ctx(SEED, fault="carry-state"))
    detail = next(c.detail for c in out.checks if c.name == lora_train.L4)
    start = int(core_lora.init_model(3, 6, 2).A[0, 0])
    assert start != clean["A"][0]
    assert detail.startswith(f"run 1 vs run 2: first part at step 0, A[0, 0] {start} vs {clean['A'][0]}; "
                             "run 2 ended at A "), detail
    assert detail.endswith(f", run 1 at A {clean['A_sha256'][:16]} B {clean['B_sha256'][:16]}"), detail


def training(A_steps, B_steps):
    losses = list(range(len(A_steps), 0, -1))
    return Training(None, None, losses, None, None, None, np.array(A_steps, np.int64), np.array(B_steps, np.int64))


def test_where_runs_part_names_the_first_step_then_a_before_b_row_major():
    a = np.zeros((3, 2, 2), np.int64)
    b = np.zeros((3, 2, 3), np.int64)
    a2, b2 = a.copy(), b.copy()
    b2[1, 1, 2] = -5  # step 1 parts in B only
    a2[2, 0, 1] = 7  # a later step's A does not come first
    assert where_runs_part(training(a, b), training(a2, b2)) == "run 1 vs run 2: first part at step 1, B[1, 2] 0 vs -5"
    a2[1, 1, 0] = 3  # the same step's A comes before its B
    assert where_runs_part(training(a, b), training(a2, b2)) == "run 1 vs run 2: first part at step 1, A[1, 0] 0 vs 3"


def test_where_runs_part_says_how_far_each_ran_when_they_agree_so_far():
    a, b = np.zeros((3, 2, 2), np.int64), np.zeros((3, 2, 3), np.int64)
    assert where_runs_part(training(a, b), training(a[:2], b[:2])) == "run 1 ran 2 steps, run 2 1"


def test_the_injected_fault_prints_where_the_runs_part(invoke):
    start = int(core_lora.init_model(3, 6, 2).A[0, 0])
    trained = lora_train.run(ctx(SEED)).metrics["A"][0]
    r = invoke("run", "lora-train", "--inject", "carry-state", "-q")
    assert r.exit_code == 1
    assert any(line.startswith(f" FAIL {lora_train.L4} -- run 1 vs run 2: first part at step 0, A[0, 0] {start} vs "
                               f"{trained}; run 2 ended at A ") for line in r.stdout.splitlines()), r.stdout
