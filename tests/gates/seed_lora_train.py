"""The lora seed's model trained as the lora-train gate specifies, line by line with Python ints.

Deliberately scalar and naive, in the style of seed_lora.py, and sharing no code with nxgates: forward and
backward are the seed's loops, then ``A[i] = A[i] - (lr_q * dA[i]) / S`` and the same for B (C's
truncating division), both from the same step's gradients; training stops at the first loss that does not
fall. Python ints never wrap, so agreeing with this
means nxgates' int64 path neither wrapped nor rounded differently.
"""

S = 1048576


def cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def seed_lora_train(T=3, DM=6, R=2, steps=10, lr_q=104858, DELTA=2097, TOLP=70):
    x = [cdiv((((i * 5 + 2) % 11) - 5) * S, 10) for i in range(T * DM)]
    W = [cdiv((((i * 7 + 3) % 13) - 6) * S, 12) for i in range(DM * DM)]
    A = [cdiv((((i * 7 + 1) % 11) - 5) * S, 16) for i in range(DM * R)]
    B = [cdiv((((i * 3 + 2) % 11) - 5) * S, 16) for i in range(R * DM)]
    st = {}

    def fwd():
        xw = [0] * (T * DM)
        h = [0] * (T * R)
        y = [0] * (T * DM)
        for t in range(T):
            for j in range(DM):
                acc = 0
                for i in range(DM):
                    acc += x[t * DM + i] * W[i * DM + j]
                xw[t * DM + j] = cdiv(acc, S)
        for t in range(T):
            for k in range(R):
                acc = 0
                for i in range(DM):
                    acc += x[t * DM + i] * A[i * R + k]
                h[t * R + k] = cdiv(acc, S)
        Lq = 0
        for t in range(T):
            for j in range(DM):
                acc = 0
                for k in range(R):
                    acc += h[t * R + k] * B[k * DM + j]
                yv = xw[t * DM + j] + cdiv(acc, S)
                y[t * DM + j] = yv
                Lq += yv * yv
        st["h"], st["y"] = h, y
        return Lq

    def bwd():
        h, y = st["h"], st["y"]
        dy = [2 * v for v in y]
        dA = [0] * (DM * R)
        dB = [0] * (R * DM)
        dh = [0] * (T * R)
        for k in range(R):
            for j in range(DM):
                acc = 0
                for t in range(T):
                    acc += cdiv(h[t * R + k] * dy[t * DM + j], S)
                dB[k * DM + j] = acc
        for t in range(T):
            for k in range(R):
                acc = 0
                for j in range(DM):
                    acc += cdiv(dy[t * DM + j] * B[k * DM + j], S)
                dh[t * R + k] = acc
        for i in range(DM):
            for k in range(R):
                acc = 0
                for t in range(T):
                    acc += cdiv(x[t * DM + i] * dh[t * R + k], S)
                dA[i * R + k] = acc
        return dA, dB

    def worst(Wt, dW):
        maxabs = max([1] + [abs(v) for v in dW])
        w = 0
        for i in range(len(Wt)):
            save = Wt[i]
            Wt[i] = save + DELTA
            Lp = fwd()
            Wt[i] = save - DELTA
            Lm = fwd()
            Wt[i] = save
            num = cdiv(Lp - Lm, 2 * DELTA)
            w = max(w, cdiv(abs(num - dW[i]) * 1000, maxabs))
        return w

    losses = [fwd()]
    for _ in range(steps):
        dA, dB = bwd()
        for i in range(DM * R):
            A[i] = A[i] - cdiv(lr_q * dA[i], S)
        for i in range(R * DM):
            B[i] = B[i] - cdiv(lr_q * dB[i], S)
        losses.append(fwd())
        if losses[-1] >= losses[-2]:  # the loss did not fall: training stops there
            break
    dA, dB = bwd()
    worst_a, worst_b = worst(A, dA), worst(B, dB)
    return {"losses": losses, "A": A, "B": B, "W": W, "final_worst_permil": {"A": worst_a, "B": worst_b}}
