"""What the seed programs print, produced on the test side: the logs ``nxgates crosscheck`` reads.

``lora_log`` prints the results of the Python-int transcription (:mod:`tests.oracles.seed_lora`) with the
seed's exact ``w``/``wn`` calls, failing-cell lines included. ``parallel_grad_log`` prints the seed's lines
from its figures with the seed's own decisions (T1: no mismatch and more non-zero cells than NP; T2: all
B tasks on more than one worker; verdict from the count).
"""

from tests.oracles.seed_lora import cdiv, seed_lora

LORA_GREEN = ("GREEN {tot}/{want} -- integer LoRA/PEFT PROVEN (frozen base + low-rank adapter grads), no float. "
              "modelwright LoRA axis: ABSENT->present.\n")
LORA_RED = "RED {tot}/{want} -- adapter Q-scaling bug\n"


def lora_log(T=3, DM=6, R=2, DELTA=2097, TOLP=70):
    r = seed_lora(T, DM, R, DELTA, TOLP)
    trained, total = DM * R + R * DM, DM * DM + DM * R + R * DM
    out = [f"=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank {R}) in Q20 INTEGER, "
           "no float ===\n\n",
           f" params: base W frozen ({DM * DM}) + LoRA A,B trainable ({trained}) = {cdiv(trained * 1000, total)}"
           f"permil of full trained (PEFT) L_q32={r['loss_q']}\n gradcheck:\n"]
    for name, key in (("A (lora)", "A"), ("B (lora)", "B")):
        g = r[key]
        for i, (ana, num) in enumerate(zip(g["analytic"], g["numeric"], strict=True)):
            rel = cdiv(abs(num - ana) * 1000, g["max_abs_grad"])
            if rel > TOLP:
                out.append(f" {name} cell {i} ana={ana} num={num} rel={rel}\n")
        out.append(f" {name}: {g['npass']}/{g['cells']} (worst={g['worst_permil']}permil of "
                   f"max|grad|={g['max_abs_grad']})\n")
    tot = r["A"]["npass"] + r["B"]["npass"]
    out.append(f"\n LoRA gradcheck: {tot}/{trained} cells correct\n")
    out.append("NX-INTFP-LORA verdict=" + (LORA_GREEN if tot == trained else LORA_RED).format(tot=tot, want=trained))
    return "".join(out)


PG_HEADER = ("nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the thread pool; "
             "per-example grads bit-identical to serial)\n")
PG_GREEN = ("TA-PARALLEL-GRAD GREEN -- the f32 sovereign autograd trains DATA-PARALLEL on the thread pool, "
            "per-example gradients bit-identical to serial. Fast model training is unblocked (integrate into the "
            "reader trainer's batch loop).\n")
PG_RED = "RED -- parallel training not correct (see mismatches)\n"


def parallel_grad_log(*, workers, ran, B, mism, chk, NP, mism2=0):
    """The seed's ``main`` printing, given what its pool and comparisons produced."""
    def ck(name, c):
        return (" PASS " if c else " FAIL ") + name + "\n"

    t1 = mism == 0 and chk > NP
    t2 = ran == B and workers > 1
    t3 = mism2 == 0
    passed = t1 + t2 + t3
    return "".join([
        PG_HEADER,
        f" workers={workers} pool tasks completed={ran}/{B}\n",
        f" bit-mismatches={mism} non-zero grad cells checked={chk}/{B * NP}\n",
        ck("T1 parallel grads BIT-IDENTICAL to serial (all B examples)", t1),
        ck("T2 pool ran all B tasks on >1 worker", t2),
        ck("T3 deterministic (re-run parallel identical)", t3),
        f"---- nx_ta_parallel_grad_gate: passed {passed} / 3\n",
        PG_GREEN if passed == 3 else PG_RED,
    ])


def serial_nonzero(D, H, O, B):
    """The seed's ``chk``: non-zero raw bits among the serial per-example gradients, one example at a time
    on a private tape (the serial pass alone, not the gate's run)."""
    import numpy as np

    from nxgates.core.mlp import Dims, example_grads, init_data
    from nxgates.core.tape import F32, Tape

    dims = Dims(D, H, O)
    w, x, t = init_data(dims, B)
    tape = Tape(dims.arena)
    row = np.zeros(dims.n_params, F32)
    count = 0
    for b in range(B):
        example_grads(tape, dims, w, x[b], t[b], row)
        count += int(np.count_nonzero(row.view(np.uint32)))
    return count
