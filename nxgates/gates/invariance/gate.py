"""invariance's parameters, validation and run: the target resolved (a usage error before any call), the
whole batch called once, then I1-I5 each judged on its own comparisons."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from nxgates.core.memory import require
from nxgates.core.mlp import Dims
from nxgates.core.pool import EXECUTORS, auto_workers, check_workers
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, GateOutput, IntParam, RunContext
from nxgates.gates._params import mlp_params
from nxgates.gates._verdict import NamedRedOutput
from nxgates.gates.invariance.builtin import SPEC as BUILTIN_SPEC
from nxgates.gates.invariance.builtin import STATIC as BUILTIN_STATIC
from nxgates.gates.invariance.builtin import check_given, mlp_grads, seed_arrays
from nxgates.gates.invariance.calls import Batch, Caller, split_batch
from nxgates.gates.invariance.checks import (
    CHECKS,
    I1,
    I2,
    I3,
    I4,
    I5,
    check_alone,
    check_mates,
    check_splits,
    passed_detail,
    sample_rows,
    split_sizes,
)
from nxgates.gates.invariance.compare import CheckTally
from nxgates.gates.invariance.faults import WorkerState, planted
from nxgates.gates.invariance.parallel import PoolJob, check_parallel
from nxgates.gates.invariance.target import load_target
from nxgates.tensors.read import read_any_npz

#: what ``static`` holds when every array is batched
NO_STATIC = "none"


class ListParam(NamedTuple):
    """A comma-separated list of items, each matching ``item`` (``--set static=W1,W2``)."""

    doc: str
    item: str  #: a regular expression every item must match
    what: str  #: how a message names an item
    default: str | None = None

    kind = "str"

    def parse(self, key: str, text: str) -> str:
        return self.check(key, text)

    def check(self, key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} takes a comma-separated list, got {value!r}")
        items = [v.strip() for v in value.split(",")]
        for v in items:
            if not re.fullmatch(self.item, v):
                raise ConfigError(f"{key}: {v!r} is not {self.what}")
        return ",".join(items)

    def describe(self) -> str:
        return "comma-separated list"


PARAMS = {
    **mlp_params(IntParam("rows of the built-in target's batch (with --inputs, the arrays give the rows)",
                          min=2, max=1 << 16), max_width=1 << 14, max_out=1 << 12, prefix="built-in target's "),
    "rows": IntParam("rows I1 and I3 check one by one: every row, or a seeded sample of this many", max=1 << 20),
    "splits": ListParam("I2's chunk sizes; half is N//2", r"half|[1-9][0-9]{0,8}", "a size (1, 2, ... or half)"),
    "static": ListParam(f"arrays passed whole, not batched on axis 0 ({NO_STATIC}: every array is batched)",
                        r"[^\s,]+", "an array name"),
    "repeat": IntParam("times every serial call is made (I5 compares them)", min=2, max=16),
    "workers": IntParam("I4's pool workers; 0 = usable CPUs, at least 2", min=0, max=1024),
    "executor": ChoiceParam("I4's worker pool: thread, process (forked) or dask (a LocalCluster)", EXECUTORS),
    "seed": IntParam("seed of the row sample, the permutation and the drawn batch mates", min=0, max=(1 << 31) - 1),
}


def validate(p: dict) -> None:
    if p["workers"] == 1:
        raise ConfigError("workers=1 cannot show parallelism (I4 needs >1 worker); use 0 (auto) or >= 2")
    check_workers(p["executor"], p["workers"] or auto_workers())
    dims = Dims.of(p)
    # the built-in target's batch: its inputs, and a few batches of gradient rows held at once
    require(4 * (dims.n_params + p["B"] * (dims.D + dims.O) + 6 * p["B"] * dims.n_params),
            f"invariance at D={p['D']} H={p['H']} O={p['O']} B={p['B']}")


def resolve(ctx: RunContext) -> tuple[Callable[..., Any], Batch, str]:
    """The target, its batch and the SPEC lines name it by; every usage error here, before any call."""
    p = ctx.params
    spec = ctx.options.get("target")
    given = ctx.options.get("inputs")
    if isinstance(given, str):  # a path: read here, and kept as arrays so the run is keyed by their digest
        given = ctx.options["inputs"] = read_any_npz(given)
    static = () if p["static"] == NO_STATIC else tuple(p["static"].split(","))
    if spec is None:
        if given is None:
            arrays = seed_arrays(p)
        else:
            check_given(given, "--inputs")
            arrays = dict(given)
        if static and set(static) != set(BUILTIN_STATIC):
            raise ConfigError(f"static={p['static']}: the built-in target's static arrays are "
                              f"{','.join(BUILTIN_STATIC)}; give --target to choose them")
        fn, static, where, spec = mlp_grads, BUILTIN_STATIC, "the built-in batch", BUILTIN_SPEC
    else:
        fn = load_target(spec)
        if given is None:
            raise ConfigError(f"--target {spec}: give --inputs F.npz, the arrays to call it with")
        arrays, where = dict(given), "--inputs"
    views = {k: np.asarray(a).view() for k, a in arrays.items()}  # read-only views, the caller's arrays untouched
    return fn, split_batch(views, static, where), spec


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    ulp = ctx.options.get("ulp") or 0
    fn, batch, spec = resolve(ctx)
    n = batch.n
    out = NamedRedOutput(CHECKS)
    out.info(f"nx_invariance: {spec} on {n} rows; batched {', '.join(_shapes(batch.batched))}"
             + (f"; static {', '.join(_shapes(batch.static))}" if batch.static else "")
             + f"; floats within {ulp} ULP")
    plant = planted(ctx.fault)
    call = Caller(fn, batch, p["repeat"], ulp, ctx.deadline, plant)
    rng = np.random.default_rng(p["seed"])

    def serial_checks() -> tuple[dict[str, np.ndarray], CheckTally, CheckTally, CheckTally]:
        """The whole batch's call, then I1-I3: one job on the call thread, the calls one after another."""
        whole = call(slice(0, n))
        ctx.check_time()
        out.info(" outputs: " + ", ".join(f"{name} {a.dtype} {a.shape}" for name, a in whole.items()))
        sample = sample_rows(n, p["rows"], rng)
        shown = f"{sample.size} rows" + ("" if sample.size == n else f" of {n} (seed {p['seed']})")
        t1 = check_alone(call, whole, sample, ulp)
        _judge(out, I1, t1, f"{shown} alone")
        ctx.check_time()
        sizes = split_sizes(p["splits"], n)
        t2 = check_splits(call, whole, sizes, n, ulp)
        _judge(out, I2, t2, f"chunks of {', '.join(map(str, sizes))}")
        ctx.check_time()
        t3 = check_mates(call, whole, sample, n, rng, ulp)
        _judge(out, I3, t3, f"the batch permuted, {shown} among drawn mates")
        return whole, t1, t2, t3

    try:
        whole, t1, t2, t3 = call.serially(serial_checks)
        ctx.check_time()
        job = PoolJob(fn, batch, plant, WorkerState() if ctx.fault == "worker-state" else None)
        pool = check_parallel(ctx, job, call, p["executor"], p["workers"], ulp)
        if pool.problems:
            out.check(I4, False, "; ".join(pool.problems + ([pool.tally.line()] if not pool.tally.passed else [])))
        else:
            _judge(out, I4, pool.tally, f"{pool.calls} calls on {pool.distinct} workers of {pool.workers} "
                                        f"({pool.executor})")
        _judge(out, I5, call.determinism, f"{call.calls // p['repeat']} serial calls, each made {p['repeat']} times")
    finally:
        call.close()
    tallies = {"I1": t1, "I2": t2, "I3": t3, "I4": pool.tally, "I5": call.determinism}
    passed = sum(c.passed for c in out.checks)
    out.metrics = {
        "target": spec,
        "rows": n,
        "outputs": {name: {"dtype": str(a.dtype), "shape": list(a.shape)} for name, a in whole.items()},
        "ulp": ulp,
        "calls": call.calls + pool.calls,
        "target_seconds": call.seconds + pool.seconds,
        "workers": pool.workers,
        "executor": pool.executor,
        "distinct_workers": pool.distinct,
        "ulp_reports": {key: t.metrics() for key, t in tallies.items()},
    }
    out.digest = lambda: _digest(whole)
    for name, a in whole.items():
        out.fingerprint_cells(f"output {name}", a)
    out.green = f"INVARIANCE GREEN {passed}/5 -- the target's rows do not depend on their batch, pool or call"
    out.red = f"INVARIANCE RED {passed}/5 -- a row's outputs depend on its batch, its worker or the call"
    out.others_failed(f"INVARIANCE RED {passed}/5", "every row's outputs independent of its batch, pool and call")
    return out


def _judge(out: GateOutput, name: str, tally: CheckTally, what: str) -> None:
    out.check(name, tally.passed, passed_detail(tally, what) if tally.passed else tally.line())


def _shapes(arrays: dict[str, np.ndarray]) -> list[str]:
    return [f"{k} {a.dtype} {a.shape}" for k, a in arrays.items()]


def _digest(outputs: dict[str, np.ndarray]) -> str:
    from nxgates.tensors.read import arrays_digest

    return arrays_digest(outputs)
