"""The lora seed's model trained as the lora-train gate specifies, line by line with Python ints.

Deliberately scalar and naive, on :class:`tests.oracles.seed_lora.SeedModel` (the seed's own loops), and
sharing no code with nxgates: ``A[i] = A[i] - (lr_q * dA[i]) / S`` and the same for B (C's truncating
division), both from the same step's gradients; training stops at the first loss that does not fall.
Python ints never wrap, so agreeing with this means nxgates' int64 path neither wrapped nor rounded
differently.
"""

from tests.oracles.seed_lora import S, SeedModel, cdiv


def seed_lora_train(T=3, DM=6, R=2, steps=10, lr_q=104858, DELTA=2097, TOLP=70):
    model = SeedModel(T, DM, R)
    A, B = model.A, model.B

    def worst(Wt, dW):
        maxabs = max([1] + [abs(v) for v in dW])
        w = 0
        for i in range(len(Wt)):
            num = model.num(Wt, i, DELTA)
            w = max(w, cdiv(abs(num - dW[i]) * 1000, maxabs))
        return w

    losses = [model.fwd()]
    for _ in range(steps):
        dA, dB = model.bwd()
        for i in range(DM * R):
            A[i] = A[i] - cdiv(lr_q * dA[i], S)
        for i in range(R * DM):
            B[i] = B[i] - cdiv(lr_q * dB[i], S)
        losses.append(model.fwd())
        if losses[-1] >= losses[-2]:  # the loss did not fall: training stops there
            break
    dA, dB = model.bwd()
    worst_a, worst_b = worst(A, dA), worst(B, dB)
    return {"losses": losses, "A": A, "B": B, "W": model.W, "final_worst_permil": {"A": worst_a, "B": worst_b}}
