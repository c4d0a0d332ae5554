"""What the lora gate reports, line by line, at a size other than the seed's; its digest; progress and
deadline checks; the sizes it accepts and the memory it asks for."""

import hashlib

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core.lora import fast as lora_fast
from nxgates.core.lora import footprint as lora_footprint
from nxgates.core.lora import gradcheck as lora_gradcheck
from nxgates.core.lora.footprint import chunk_elements
from nxgates.errors import ConfigError, GateTimeout, ResourceError
from nxgates.gatekit import Progress, RunContext
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ODD, checks, ctx, lines
from tests.oracles.seed_lora import seed_lora


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
def test_the_report_at_an_odd_size(algorithm):
    out = lora_gate.run(ctx({**ODD, "algorithm": algorithm}))
    seed = seed_lora(2, 5, 2, 2097, 70)
    assert lines(out) == [
        "=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank 2) in Q20 INTEGER, no float ===",
        "",
        " params: base W frozen (25) + LoRA A,B trainable (20) = 444permil of full trained (PEFT) "
        f"L_q32={seed['loss_q']}",
        " gradcheck:",
        " A (lora): 10/10 (worst=1permil of max|grad|=118926)",
        " B (lora): 10/10 (worst=0permil of max|grad|=202361)",
        "",
        " LoRA gradcheck: 20/20 cells correct",
    ]
    assert checks(out) == {
        lora_gate.CHECK_A: (True, "10/10 cells within 70permil (worst=1permil)"),
        lora_gate.CHECK_B: (True, "10/10 cells within 70permil (worst=0permil)"),
        lora_gate.CHECK_FROZEN: (True, "W bit-identical after the run (25 cells)"),
    }
    verbose = lines(out, "verbose")
    assert len(verbose) == 20
    assert verbose[2] == (f"   A (lora) cell 2 ana={seed['A']['analytic'][2]} num={seed['A']['numeric'][2]} rel=1")
    assert verbose[10].startswith(f"   B (lora) cell 0 ana={seed['B']['analytic'][0]} ")
    assert lines(out, "detail") == []
    assert out.green == ("NX-INTFP-LORA verdict=GREEN 20/20 -- integer LoRA/PEFT PROVEN (frozen base + low-rank "
                         "adapter grads), no float.")
    assert out.red == "NX-INTFP-LORA verdict=RED 20/20 -- adapter Q-scaling bug or base W not frozen"
    m = out.metrics
    assert (m["loss_q"], m["trained_params"], m["total_params"], m["peft_permil"]) == (seed["loss_q"], 20, 45, 444)
    assert m["A"]["max_abs_grad"] == 118926 and m["B"]["worst_permil"] == 0


def test_detail_lines_name_exactly_the_cells_above_the_tolerance():
    out = lora_gate.run(ctx({**ODD, "tol_permil": 0}))
    seed = seed_lora(2, 5, 2, 2097, 0)
    above = [i for i in range(10) if lines(out, "verbose")[i].endswith("rel=1")]
    assert above == [2, 3, 6, 7]
    assert lines(out, "detail") == [
        f" A (lora) cell {i} ana={seed['A']['analytic'][i]} num={seed['A']['numeric'][i]} rel=1" for i in above]
    assert checks(out)[lora_gate.CHECK_A] == (False, "6/10 cells within 0permil (worst=1permil)")
    assert lora_gate.run(ctx({**ODD, "tol_permil": 1})).checks[0].passed  # rel == tol passes


def test_the_digest_fingerprints_the_loss_and_every_integer():
    out = lora_gate.run(ctx(ODD))
    h = hashlib.sha256(str(out.metrics["loss_q"]).encode())
    for key in ("A", "B"):
        h.update(np.array(out.metrics[key]["analytic"], dtype="<i8").tobytes())
        h.update(np.array(out.metrics[key]["numeric"], dtype="<i8").tobytes())
    assert out.digest == h.hexdigest() == "19b26ea9ca93c9de649750f36223b18f521c8e7f3e4838b7e62584aa34ac5eb2"


def test_the_digest_is_hashed_only_when_read(monkeypatch):
    """Start-up: a single run never reads the digest (--repeat does), so it never imports hashlib."""
    calls = []
    digest = lora_gate._digest
    monkeypatch.setattr(lora_gate, "_digest", lambda *args: calls.append(1) or digest(*args))
    out = lora_gate.run(ctx(ODD))
    assert calls == []
    assert out.digest == out.digest == lora_gate.run(ctx({**ODD, "algorithm": "naive"})).digest
    assert calls == [1, 1]

# ---- progress, deadlines, sizes --------------------------------------------------------------------------


class Recorder(Progress):
    def __init__(self):
        self.events = []
        self.done = 0

    def start(self, label, total):
        self.events.append((label, total))

    def advance(self, steps=1):
        self.done += steps


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
@pytest.mark.parametrize("T,DM,R", [(2, 5, 2), (3, 40, 7)])
def test_progress_counts_every_gradcheck_cell_once(algorithm, T, DM, R, monkeypatch):
    monkeypatch.setattr(lora_fast, "proven_a", lambda *args: False)  # the guarded path too
    rec = Recorder()
    lora_gate.run(RunContext(params={**ODD, "T": T, "DM": DM, "R": R, "algorithm": algorithm}, progress=rec))
    assert rec.events == [("gradcheck cells", 2 * DM * R)]
    assert rec.done == 2 * DM * R  # A and B: DM * R cells each


def test_the_naive_path_checks_the_deadline_every_64_cells():
    rec = Recorder()
    seen = []

    class Clock(RunContext):
        def check_time(self):
            seen.append(rec.done)

    m = core_lora.init_model(2, 100, 2)
    lora_gradcheck.diffs_naive(m, m.A, 2097, Clock(params={}, progress=rec))
    assert seen == [64, 128, 192]


def test_an_expired_deadline_stops_a_run():
    with pytest.raises(GateTimeout):
        lora_gate.run(RunContext(params=ODD, deadline=0.0))


def test_rank_equal_to_width_is_allowed():
    lora_gate.validate({**ODD, "R": 5})
    with pytest.raises(ConfigError, match=r"^R=6 must not exceed DM=5 \(a LoRA rank is at most the width\)$"):
        lora_gate.validate({**ODD, "R": 6})


def test_the_memory_bound_asked_for_counts_three_copies_of_the_tensors_and_the_temporaries(monkeypatch):
    asked = []
    monkeypatch.setattr(lora_footprint, "require", lambda nbytes, what: asked.append((nbytes, what)))
    lora_gate.validate({**ODD, "T": 7, "DM": 11, "R": 3})
    tensors = 7 * 11 + 11 * 11 + 2 * 11 * 3
    chunks = 4 * 11 * (3 * 7 * 11) + 11 * 11 * 7 + 4 * 2 * 3 * 7 * 11  # every row of A at once: blocks and moves
    assert asked == [(8 * (3 * tensors + 12 * 7 * 11 + 4 * 7 * 3 + chunks), "lora at T=7 DM=11 R=3")]


def test_chunk_temporaries_are_capped_by_the_chunk_sizes_and_by_the_model():
    assert chunk_elements(3, 6, 2) == 4 * 6 * 36 + 11 * 6 * 3 + 4 * 2 * 2 * 3 * 6  # the seed: a few KiB
    assert chunk_elements(16, 256, 8) == 4 * 64 * 32768 + 11 * 256 * 16 + 4 * 2 * 8 * 16 * 256  # large
    assert chunk_elements(32, 1024, 16) == 4 * 4 * 524288 + 11 * 1024 * 32 + 4 * (1 << 20)  # xl: moves capped
    assert chunk_elements(16, 1000, 3) == 4 * 43 * 48000 + 11 * 1000 * 16 + 4 * 2 * 3 * 16 * 1000  # 43.7 rows
    assert chunk_elements(64, 4096, 64) == 4 * 1 * 64 * 64 * 4096 + 11 * 4096 * 64 + 4 * (1 << 20)  # a block
    # beyond the guarded cap: one row of A's guarded block is more than CHECKED_ELEMENTS


def test_a_tight_memory_limit_still_runs_the_seed_size(lora_params, monkeypatch):
    """The estimate once planned 64 MiB of chunks per worker at any size: a 250 MB ulimit -v refused even
    the seed's 3 x 6 model."""
    from nxgates.core import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 16 << 20)  # an 8 MiB budget
    lora_gate.validate({**lora_params, "workers": 1})
    with pytest.raises(ResourceError, match=r"lora at T=16 DM=256 R=8 needs about"):
        lora_gate.validate({**lora_params, "T": 16, "DM": 256, "R": 8, "workers": 1})


def test_the_smallest_model_reports_two_thirds_of_its_parameters_trained():
    out = lora_gate.run(ctx({**ODD, "T": 1, "DM": 1, "R": 1}))
    assert " params: base W frozen (1) + LoRA A,B trainable (2) = 666permil of full trained (PEFT) " in lines(out)[2]
    assert out.metrics["peft_permil"] == 666


def test_relative_error_is_per_mil_of_max_grad_and_of_one_when_every_gradient_is_zero():
    """The seed's ``maxabs = max(1, max|ana|)``: a zero gradient still gives a finite, exact rel."""
    g = lora_gradcheck.judge("A", np.zeros((1, 2), dtype=np.int64), np.array([2 * 5 * 3, 0]), 5, 70)
    assert (g.maxabs, g.numeric.tolist(), g.rel.tolist()) == (1, [3, 0], [3000, 0])
    g = lora_gradcheck.judge("A", np.array([1, 0]), np.array([0, 0]), 5, 70)
    assert (g.maxabs, g.rel.tolist()) == (1, [1000, 0])
    empty = lora_gradcheck.judge("A", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 5, 70)
    assert (empty.maxabs, empty.cells, empty.worst, empty.passed) == (1, 0, 0, True)
