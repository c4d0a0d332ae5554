"""A line-by-line transcription of ../shared/seeds/nx_intfp_lora_gradcheck_gate.nx with Python ints.

Deliberately scalar and naive: it shares no code with nxgates, so agreeing with it means agreeing with
the seed program. ``cdiv`` is C's truncating division (the seed's i64 ``/``). :class:`SeedModel` is the
seed's tensors with its ``lora_fwd`` and ``lora_bwd``; :func:`seed_lora` its gradcheck, and
:mod:`tests.oracles.seed_lora_train` trains the same model.
"""

S = 1048576


def cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def python_int_loss(x, W, A, B) -> int:
    """The seed's ``L = sum y^2`` for Q20 nested lists, in Python ints (which never wrap): any model, any size."""
    T, DM, R = len(x), len(W), len(B)
    total = 0
    for t in range(T):
        h = [cdiv(sum(x[t][i] * A[i][k] for i in range(DM)), S) for k in range(R)]
        for j in range(DM):
            y = cdiv(sum(x[t][i] * W[i][j] for i in range(DM)), S) + cdiv(sum(h[k] * B[k][j] for k in range(R)), S)
            total += y * y
    return total


class SeedModel:
    """The seed's flat tensors x, W, A, B; ``fwd`` keeps h and y for ``bwd``, as the seed's globals do."""

    def __init__(self, T: int, DM: int, R: int):
        self.T, self.DM, self.R = T, DM, R
        self.x = [cdiv((((i * 5 + 2) % 11) - 5) * S, 10) for i in range(T * DM)]
        self.W = [cdiv((((i * 7 + 3) % 13) - 6) * S, 12) for i in range(DM * DM)]
        self.A = [cdiv((((i * 7 + 1) % 11) - 5) * S, 16) for i in range(DM * R)]
        self.B = [cdiv((((i * 3 + 2) % 11) - 5) * S, 16) for i in range(R * DM)]
        self.h: list[int] = []
        self.y: list[int] = []

    def fwd(self) -> int:
        T, DM, R, x, W, A, B = self.T, self.DM, self.R, self.x, self.W, self.A, self.B
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
        self.h, self.y = h, y
        return Lq

    def bwd(self) -> tuple[list[int], list[int]]:
        T, DM, R, x, B = self.T, self.DM, self.R, self.x, self.B
        h, y = self.h, self.y
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

    def num(self, Wt: list[int], i: int, DELTA: int) -> int:
        """The central difference of cell i of ``Wt`` (A or B, moved in place and restored)."""
        save = Wt[i]
        Wt[i] = save + DELTA
        Lp = self.fwd()
        Wt[i] = save - DELTA
        Lm = self.fwd()
        Wt[i] = save
        return cdiv(Lp - Lm, 2 * DELTA)


def seed_lora(T=3, DM=6, R=2, DELTA=2097, TOLP=70, fault=None):
    model = SeedModel(T, DM, R)

    def gcheck(Wt, dW):
        maxabs = max([1] + [abs(v) for v in dW])
        npass = worst = 0
        nums = []
        for i in range(len(Wt)):
            num = model.num(Wt, i, DELTA)
            model.fwd()
            rel = cdiv(abs(num - dW[i]) * 1000, maxabs)
            npass += rel <= TOLP
            worst = max(worst, rel)
            nums.append(num)
        return {"passed": npass == len(Wt), "cells": len(Wt), "npass": npass, "worst_permil": worst,
                "max_abs_grad": maxabs, "analytic": list(dW), "numeric": nums}

    L0 = model.fwd()
    dA, dB = model.bwd()
    return {"loss_q": L0, "A": gcheck(model.A, dA), "B": gcheck(model.B, dB)}
