"""References for the tape's two reduction orders that share no code with the tape: a float32 scalar loop in
Python, and the same loop in C (compiled in the test where a compiler is present)."""

import shutil
import subprocess
from pathlib import Path

import numpy as np

from tests.helpers import reference_tree_sum

F32 = np.float32


def reduce_scalars(values: list, order: str) -> np.float32:
    """Sum float32 scalars: ``sequential`` left to right from +0.0, ``tree`` by pairwise halving."""
    if order == "sequential":
        acc = F32(0.0)
        for v in values:
            acc = F32(acc + v)
        return acc
    return reference_tree_sum(values)


def mlp_grads(W1: np.ndarray, W2: np.ndarray, x: np.ndarray, t: np.ndarray, order: str) -> np.ndarray:
    """One example's [dW1 row-major, dW2 row-major], every operation a float32 scalar one."""
    H, D = W1.shape
    O = W2.shape[0]
    h = [reduce_scalars([F32(W1[i, j] * x[j]) for j in range(D)], order) for i in range(H)]
    a = [hi if hi > 0 else F32(0) for hi in h]
    y = [reduce_scalars([F32(W2[o, i] * a[i]) for i in range(H)], order) for o in range(O)]
    n = F32(O)
    diff = [F32(y[o] - t[o]) for o in range(O)]
    two_over_n = F32(F32(2) / n)
    dy = [F32(F32(d * two_over_n) * F32(1)) for d in diff]
    dW2 = [F32(dy[o] * a[i]) for o in range(O) for i in range(H)]
    da = [reduce_scalars([F32(W2[o, i] * dy[o]) for o in range(O)], order) for i in range(H)]
    dh = [da[i] if h[i] > 0 else F32(0) for i in range(H)]
    dW1 = [F32(dh[i] * x[j]) for i in range(H) for j in range(D)]
    return np.array(dW1 + dW2, dtype=F32)


def mlp_loss(W1: np.ndarray, W2: np.ndarray, x: np.ndarray, t: np.ndarray, order: str) -> np.float32:
    H, D = W1.shape
    O = W2.shape[0]
    h = [reduce_scalars([F32(W1[i, j] * x[j]) for j in range(D)], order) for i in range(H)]
    a = [hi if hi > 0 else F32(0) for hi in h]
    y = [reduce_scalars([F32(W2[o, i] * a[i]) for i in range(H)], order) for o in range(O)]
    sq = [F32(F32(y[o] - t[o]) * F32(y[o] - t[o])) for o in range(O)]
    return F32(reduce_scalars(sq, order) / F32(O))


C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>

static int sequential;

static float reduce(float *v, int n) {
    if (sequential) {
        float acc = 0.0f;
        for (int i = 0; i < n; i++) acc = acc + v[i];
        return acc;
    }
    while (n > 1) {
        int h = n / 2;
        for (int k = 0; k < h; k++) v[k] = v[k] + v[k + n - h];
        n -= h;
    }
    return v[0];
}

int main(int argc, char **argv) {
    int D = atoi(argv[1]), H = atoi(argv[2]), O = atoi(argv[3]), B = atoi(argv[4]);
    sequential = atoi(argv[5]);
    int np_ = H * D + O * H, big = D > H ? (D > O ? D : O) : (H > O ? H : O);
    float *W1 = malloc(sizeof(float) * H * D), *W2 = malloc(sizeof(float) * O * H);
    float *x = malloc(sizeof(float) * D), *t = malloc(sizeof(float) * O), *buf = malloc(sizeof(float) * big);
    float *h = malloc(sizeof(float) * H), *a = malloc(sizeof(float) * H), *y = malloc(sizeof(float) * O);
    float *dy = malloc(sizeof(float) * O), *dh = malloc(sizeof(float) * H), *g = malloc(sizeof(float) * np_);
    if (fread(W1, sizeof(float), H * D, stdin) != (size_t)(H * D)) return 1;
    if (fread(W2, sizeof(float), O * H, stdin) != (size_t)(O * H)) return 1;
    for (int b = 0; b < B; b++) {
        if (fread(x, sizeof(float), D, stdin) != (size_t)D) return 1;
        if (fread(t, sizeof(float), O, stdin) != (size_t)O) return 1;
        for (int i = 0; i < H; i++) {
            for (int j = 0; j < D; j++) buf[j] = W1[i * D + j] * x[j];
            h[i] = reduce(buf, D);
            a[i] = h[i] > 0 ? h[i] : 0.0f;
        }
        for (int o = 0; o < O; o++) {
            for (int i = 0; i < H; i++) buf[i] = W2[o * H + i] * a[i];
            y[o] = reduce(buf, H);
        }
        float n = (float)O, two_over_n = 2.0f / n;
        for (int o = 0; o < O; o++) {
            float d = y[o] - t[o];
            float s = d * two_over_n;
            dy[o] = s * 1.0f;
        }
        for (int o = 0; o < O; o++)
            for (int i = 0; i < H; i++) g[H * D + o * H + i] = dy[o] * a[i];
        for (int i = 0; i < H; i++) {
            for (int o = 0; o < O; o++) buf[o] = W2[o * H + i] * dy[o];
            float da = reduce(buf, O);
            dh[i] = h[i] > 0 ? da : 0.0f;
        }
        for (int i = 0; i < H; i++)
            for (int j = 0; j < D; j++) g[i * D + j] = dh[i] * x[j];
        fwrite(g, sizeof(float), np_, stdout);
    }
    return 0;
}
"""


def compile_c(tmp_path: Path) -> Path | None:
    """The C reference built with no optimisation and no contraction into fused multiply-adds (None: no cc)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    src, exe = tmp_path / "ref.c", tmp_path / "ref"
    src.write_text(C_SOURCE)
    subprocess.run([cc, "-O0", "-ffp-contract=off", "-std=c99", "-o", str(exe), str(src)], check=True)
    return exe


def c_grads(exe: Path, W1, W2, X, T, order: str) -> np.ndarray:
    B, D = X.shape
    H, O = W1.shape[0], W2.shape[0]
    stdin = W1.astype("<f4").tobytes() + W2.astype("<f4").tobytes()
    stdin += b"".join(X[b].astype("<f4").tobytes() + T[b].astype("<f4").tobytes() for b in range(B))
    out = subprocess.run([str(exe), str(D), str(H), str(O), str(B), "1" if order == "sequential" else "0"],
                         input=stdin, capture_output=True, check=True).stdout
    return np.frombuffer(out, "<f4").reshape(B, H * D + O * H)


def inputs_with_zeros_in_h(D: int, H: int, O: int, B: int, seed: int = 0):
    """Float32 inputs whose sums round differently in the two orders, with exact zeros in ``h``: W1's row 0 is
    all zeros (a sum of signed zeros), row 1 cancels (w, -w on two equal inputs)."""
    rng = np.random.default_rng(seed)
    W1 = (rng.standard_normal((H, D)) * np.exp2(rng.integers(-6, 6, (H, D)))).astype(F32)
    W2 = (rng.standard_normal((O, H)) * np.exp2(rng.integers(-6, 6, (O, H)))).astype(F32)
    X = (rng.standard_normal((B, D)) * np.exp2(rng.integers(-6, 6, (B, D)))).astype(F32)
    T = rng.standard_normal((B, O)).astype(F32)
    W1[0] = 0
    W1[0, ::2] = -0.0
    W1[1] = 0
    W1[1, 0], W1[1, 1] = 1.5, -1.5
    X[:, 1] = X[:, 0]
    X[0] = -np.abs(X[0])  # example 0: every product of row 0 is -0.0 or +0.0 by sign
    return W1, W2, X, T
