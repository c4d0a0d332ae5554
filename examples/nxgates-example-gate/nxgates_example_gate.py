"""An example third-party gate: Q20 fixed-point dot products, vectorised, equal Python's exact integers.

Everything nxgates needs from a plugin module is ``GATE`` (what the gate is) and ``TABLE`` (its default
table: what a gates.toml ``[gates.NAME]`` table would say, without ``module``). It uses only the public API
of :mod:`nxgates.gatekit`.
"""

from __future__ import annotations

import numpy as np

from nxgates.gatekit import ChoiceParam, ConfigError, Fault, GateDef, GateOutput, IntParam, RunContext

S = 1 << 20  # Q20: 1.0 is 2^20

CHECK_DOTS = "dot products equal Python integers"
CHECK_ROUNDING = "negative quotients round toward zero"

PARAMS = {
    "N": IntParam("length of each dot product", min=1, max=1 << 16),
    "rows": IntParam("how many dot products", min=1, max=1 << 12),
    "kernel": ChoiceParam("numpy (vectorised) or python (a scalar loop)", ("numpy", "python")),
}

FAULTS = {
    "floor-division": Fault("divides by S with numpy's floor division instead of C's truncation",
                            (CHECK_DOTS, CHECK_ROUNDING)),
    "drop-last": Fault("every dot product forgets its last term", (CHECK_DOTS,)),
}

TABLE = {
    "description": "example plugin: Q20 dot products with truncating division equal Python's exact integers",
    "aliases": ["q20-dot-example"],
    "params": {"N": 64, "rows": 8, "kernel": "numpy"},
    "presets": {"large": {"N": 4096, "rows": 256}},
}


def tdiv(a: np.ndarray, b: int, fault: str | None) -> np.ndarray:
    """C's ``a / b`` for int64 (toward zero); the planted fault uses numpy's floor division."""
    if fault == "floor-division":
        return a // b
    q = np.abs(a) // abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def exact(a: list[int], b: list[int]) -> int:
    """The reference: Python ints, C's truncating division."""
    total = sum(x * y for x, y in zip(a, b, strict=True))
    q = abs(total) // S
    return q if total >= 0 else -q


def validate(p: dict) -> None:
    if p["N"] * p["rows"] > 1 << 22:
        raise ConfigError(f"N*rows={p['N'] * p['rows']} is more than the 4M cells this example allows")


def run(ctx: RunContext) -> GateOutput:
    n, rows, fault = ctx.params["N"], ctx.params["rows"], ctx.fault
    out = GateOutput()
    i = np.arange(rows * n, dtype=np.int64)
    a = ((((i * 7 + 3) % 13) - 6) * S // 5).reshape(rows, n)
    b = ((((i * 5 + 2) % 11) - 5) * S // 7).reshape(rows, n)
    terms = n - 1 if fault == "drop-last" else n
    if ctx.params["kernel"] == "numpy":
        got = tdiv(np.sum(a[:, :terms] * b[:, :terms], axis=1), S, fault)
    else:
        got = np.array([tdiv(np.array(sum(int(x) * int(y) for x, y in zip(a[r, :terms], b[r, :terms],
                                                                        strict=True))), S, fault)
                        for r in range(rows)], dtype=np.int64)
    want = [exact(a[r].tolist(), b[r].tolist()) for r in range(rows)]
    bad = [r for r in range(rows) if int(got[r]) != want[r]]
    out.info(f" q20-dot: {rows} dot products of length {n}, first = {want[0]}")
    out.check(CHECK_DOTS, not bad, f"{rows - len(bad)}/{rows} rows exact" + (f" (first wrong: row {bad[0]})"
                                                                             if bad else ""))
    probe = int(tdiv(np.array([-3 * S]), 10, fault)[0])
    out.check(CHECK_ROUNDING, probe == -314572, f"(-3*S)/10 = {probe} (C gives -314572)")
    out.metrics = {"rows": rows, "wrong_rows": len(bad), "first": want[0]}
    out.digest = str(want)
    out.green = f"Q20-DOT GREEN {rows}/{rows} -- vectorised Q20 dot products equal exact integers"
    out.red = f"Q20-DOT RED {rows - len(bad)}/{rows} -- a Q20 dot product or its rounding is wrong"
    return out


GATE = GateDef(params=PARAMS, checks=(CHECK_DOTS, CHECK_ROUNDING), run=run, faults=FAULTS, validate=validate)
