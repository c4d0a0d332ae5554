"""parallel-grad's declaration (parameters, checks, faults), validation and run: the pool is made here,
the batch streamed by :mod:`.stream`, and the checks judged on the tally."""

from __future__ import annotations

import numpy as np

from nxgates.core.bits import BitComparison
from nxgates.core.chunks import chunk_examples
from nxgates.core.gradfiles import GradReader, GradWriter
from nxgates.core.memory import fmt_bytes, require
from nxgates.core.mlp import Dims, MlpInputs, init_examples, init_weights, reduction_of
from nxgates.core.pool import (
    EXECUTORS,
    AutoExecutor,
    Pool,
    auto_workers,
    check_workers,
    choose_executor,
    dask_available,
    make_pool,
)
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, GateOutput, IntParam, RunContext, Variant
from nxgates.gates._params import REDUCTION_PARAM, mlp_params
from nxgates.gates._verdict import NamedRedOutput
from nxgates.gates.parallel_grad.checks import T1, T2, T3, T4, judge_t1, pool_problems
from nxgates.gates.parallel_grad.faults import POOL_FAULTS, plant_shared_arena
from nxgates.gates.parallel_grad.host_memory import HostFiles
from nxgates.gates.parallel_grad.job import GradJob, movable_slots
from nxgates.gates.parallel_grad.stream import PoolStart, stream
from nxgates.streams import shown

#: What executor=auto means here: dask given a scheduler address, else processes from NP = 16384 up, else
#: threads. Measured on 2 cores (make bench): threads hold the GIL between numpy calls and gain nothing at any
#: size here; forked processes reach 1.6x at NP = 34k and 1.8x at NP = 203k, but cost a fork at start.
AUTO_EXECUTOR = AutoExecutor(process_from=16384)

#: the loosest ``--ulp``: one binade of float32 (2^23 values). Any wider and the numbers compared may differ by
#: more than a factor of two, or in sign, and still pass.
ULP_MAX = 1 << 23

PARAMS = {
    **mlp_params(IntParam("examples in the batch (one pool task each)", min=2, max=1 << 20)),
    "workers": IntParam("pool workers; 0 = usable CPUs, at least 2", min=0, max=1024),
    "executor": ChoiceParam("worker pool: thread, process (forked, sharing memory), dask (a LocalCluster, or "
                            "--scheduler ADDRESS), or auto (process from "
                            f"NP >= {AUTO_EXECUTOR.process_from} up, where it pays)", ("auto", *EXECUTORS)),
    "reduction": REDUCTION_PARAM,
}


def validate(p: dict) -> None:
    if p["workers"] == 1:
        raise ConfigError("workers=1 cannot show parallelism (T2 needs >1 worker); use 0 (auto) or >= 2")
    dims = Dims.of(p)
    workers = p["workers"] or auto_workers()
    # forks are capped: exit 2, not a hang
    check_workers(choose_executor(p["executor"], None, AUTO_EXECUTOR, dims.n_params), workers)
    remote = p["executor"] == "dask"  # (executor=auto with --scheduler is dask too; checked again at run time)
    require(footprint_bytes(dims, workers, p["B"], remote),
            f"parallel-grad at D={p['D']} H={p['H']} O={p['O']} B={p['B']}")


def footprint_bytes(dims: Dims, workers: int, B: int, remote: bool = False) -> int:
    """Planned memory: one chunk's gradient rows (parallel, re-run, serial, a saved file's) and inputs, the
    weights, and an arena per worker plus the serial one. B enters only through the chunk size's cap, on
    every executor."""
    chunk = chunk_examples(dims.n_params, workers, B, remote)
    rows = 4 * chunk * dims.n_params + chunk * (dims.D + dims.O)
    arenas = (workers + 1) * (2 * dims.arena + dims.n_w1)
    return 4 * (rows + arenas + dims.n_params + dims.n_w1)


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    dims = Dims.of(p)
    B = p["B"]
    ulp = ctx.options.get("ulp")
    if ulp is not None and ctx.options.get("compare_grads") is None:
        raise ConfigError("--ulp sets how close --compare-grads must be; give --compare-grads FILE too")
    if ulp is not None and not 0 <= ulp <= ULP_MAX:
        raise ConfigError(f"--ulp {ulp} is out of range [0, {ULP_MAX}] (at most one binade of float32)")
    compare = GradReader.open(ctx.options.get("compare_grads"), B, dims.n_params, grad_tensors(dims))
    scheduler = ctx.options.get("scheduler")
    host = HostFiles()
    pool = None
    try:
        executor = choose_executor(p["executor"], scheduler, AUTO_EXECUTOR, dims.n_params)
        pool = make_pool(executor, p["workers"], POOL_FAULTS.get(ctx.fault), scheduler)
        return _run(ctx, pool, host, dims, B, compare)
    finally:
        if pool is not None:
            pool.close()
        host.remove()
        if compare is not None:
            compare.close()


def _run(ctx: RunContext, pool: Pool, host: HostFiles, dims: Dims, B: int, compare: GradReader | None
         ) -> GateOutput:
    out = NamedRedOutput((T1, T2, T3))
    NP = dims.n_params
    chunk = chunk_examples(NP, pool.n_workers, B, pool.remote)
    # a remote pool's workers on this host write their rows straight into host memory, as forked ones do
    shared_rows = not pool.remote or pool.same_host  # (the remote pool, Dask's, knows where its workers are)
    rows_array = host.array if pool.remote and shared_rows else pool.array
    # the re-run's rows: only where the gate compares them (a cluster's tasks do not count, see run_task)
    outputs = [rows_array((chunk, NP)), rows_array((chunk, NP)) if pool.remote else None]
    job = GradJob(dims, pool.array((NP,)), pool.array((dims.D, dims.H)), pool.array((chunk, dims.D)),
              pool.array((chunk, dims.O)), outputs, ctx.fault, rows_shared=shared_rows, n_workers=pool.n_workers,
              inputs_by_index=pool.remote, reduce=reduction_of(ctx.params), given=MlpInputs.of(ctx.options),
              claimable_slots=movable_slots(B, chunk, pool.n_workers) if pool.moves_tasks else [])
    if not pool.remote:  # the workers count their rows' differences from the serial rows (see run_task); a
        # dask cluster's copy of the job has no serial rows: its rows are compared by the fold
        job.serial, job.counted = pool.array((2, chunk, NP)), pool.array((2, chunk), np.int64)
    job.w[...] = init_weights(dims, job.given)
    job.w1_t[...] = job.w[: dims.n_w1].reshape(dims.H, dims.D).T
    if ctx.fault == "shared-arena":
        plant_shared_arena(job, pool, host, chunk)
    # the first chunk's (a cluster's tasks make their own)
    job.x[...], job.t[...] = init_examples(dims, 0, chunk, job.given)
    handle = pool.register(job)
    out.info(f"nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the {pool.kind} pool;"
             " per-example grads bit-identical to serial)")
    # ---- pool start-up first: forked workers then do not inherit the serial pass's private arrays. The
    # workers fork here and prepare while the parent computes the first chunk's serial rows.
    start = PoolStart(pool, ctx, handle)

    save = GradWriter.create(ctx.options.get("save_grads"), B, NP)
    try:
        tally = stream(ctx, pool, handle, job, B, chunk, compare, save, start.ready)
        if save is not None:
            save.finish()
    finally:
        if save is not None:
            save.discard()
    records, rerun_records = tally.records, tally.rerun_records
    ran = sum(r.done and r.error is None for r in records)
    out.info(f" workers={pool.n_workers} pool tasks completed={ran}/{B}")
    for r in records:
        out.verbose(f"   {r.label}: worker {r.worker}, " + ("done" if r.done and not r.error else r.error or "lost"))

    t1 = BitComparison(tally.mismatches, tally.nonzero, tally.bad_rows)
    mism, nonzero = t1.mismatches, t1.nonzero
    out.info(f" bit-mismatches={mism} non-zero grad cells checked={nonzero}/{B * NP}")
    for b, n in t1.bad_rows[:8]:
        out.detail(f"   example {b}: {n} cells differ")
    if ctx.fault is None and not mism and nonzero <= NP:
        # the seed's formulas leave too few cells non-zero at these sizes: a T1 that could only say "vacuous"
        raise ConfigError(f"parallel-grad at D={dims.D} H={dims.H} O={dims.O} B={B}: only {nonzero} gradient cells "
                          f"are non-zero, no more than one example has ({NP}), so T1's comparison would be vacuous; "
                          "use larger sizes")
    out.check(T1, *judge_t1(t1, B, NP))

    distinct = pool.workers_used(records)
    pool_notes, pool_metrics = pool.health(records)
    for note in pool_notes:
        out.info(note)
    problems = pool_problems(records, tally.waited, B, len(distinct), pool.n_workers)
    if problems and pool_notes:
        problems.append(pool_notes[0].strip())
    out.check(T2, not problems, "; ".join(problems) or
              f"{ran}/{B} tasks on {len(distinct)} distinct workers of {pool.n_workers}")

    mism2 = tally.rerun_mismatches
    rerun_problems = pool_problems(rerun_records, tally.rerun_waited, B, None, pool.n_workers)
    out.check(T3, mism2 == 0 and not rerun_problems,
              "; ".join(rerun_problems) or (f"{mism2} cells differ between the two parallel runs" if mism2
                                       else "second parallel run bit-identical"))

    digest = tally.sha.hexdigest()
    if compare is not None:
        judge_t4(out, compare, tally.file_mismatches, ctx.options["compare_grads"], ctx.options.get("ulp") or 0,
                 digest)
    if save is not None:
        out.info(f" saved per-example gradients to {ctx.options['save_grads']} ({fmt_bytes(4 * B * NP)})")

    out.metrics = {
        "workers": pool.n_workers,
        "executor": pool.kind,
        "tasks_completed": ran,
        "distinct_workers": len(distinct),
        "bit_mismatches": mism,
        "rerun_bit_mismatches": mism2,
        "nonzero_cells": nonzero,
        "total_cells": B * NP,
        "grads_sha256": digest,
        "serial_seconds": tally.serial_seconds,
        "parallel_seconds": tally.parallel_seconds,
        "pool_start_seconds": start.seconds,
        "chunk_examples": chunk,
        "tasks_per_worker": pool.tasks_per_worker(records),
        **pool_metrics,
    }
    if compare is not None and compare.report is not None:
        out.metrics["compare_grads"] = {"ulp": ctx.options.get("ulp") or 0, **compare.report.metrics()}
    if pool.kind == "dask":
        out.metrics.update(scheduler=pool.scheduler, cluster_start_seconds=pool.start_seconds,
                           rows="shared memory" if job.rows_shared else "returned")
    out.digest = digest
    # what --baseline holds: the gradients' digest and the counts that depend on the numbers alone (never
    # timings, workers or tasks, which vary from run to run)
    out.fingerprint("grads_sha256", digest)
    for name in ("nonzero_cells", "total_cells", "bit_mismatches", "rerun_bit_mismatches"):
        out.fingerprint(name, out.metrics[name])
    out.green = ("TA-PARALLEL-GRAD GREEN -- the f32 autograd trains DATA-PARALLEL on the worker pool, "
                 "per-example gradients bit-identical to serial.")
    out.red = "TA-PARALLEL-GRAD RED -- parallel training not correct (see mismatches)"
    out.others_failed("TA-PARALLEL-GRAD RED", "parallel per-example gradients bit-identical to serial, on >1 "
                      "worker, reproducible")
    return out


def grad_tensors(dims: Dims) -> tuple:
    """Where W1's and W2's gradients sit in a row: ``[dW1 (H x D) row-major, dW2 (O x H) row-major]``."""
    from nxgates.core.ulp import Tensor

    return Tensor("W1", 0, dims.H, dims.D), Tensor("W2", dims.n_w1, dims.O, dims.H)


def judge_t4(out: GateOutput, compare: GradReader, mismatches: int, path: str, ulps: int, digest: str) -> None:
    """T4: the file's rows equal ours bit for bit (``ulps`` 0) or within ``ulps`` ULPs; where they differ,
    the report says where and by how much (lines and the ``compare_grads`` metrics). BIT-IDENTICAL is said
    only when no cell differs; a pass within ULPs says how many cells differ, how far, and how many in sign."""
    path = shown(path)  # the user's file name, on one line of the check's detail
    report = compare.report
    if mismatches == 0:
        out.check(T4, True, f"matches {path} (sha256 {digest[:16]}), BIT-IDENTICAL")
        return
    passed = report.passes(ulps)
    sign = f", {report.sign} of opposite sign" if report.sign else ""
    for line in report.lines():
        out.detail(line)
    if passed:
        out.check(T4, True, f"within {ulps} ULP ({mismatches} cells differ from {path}, worst {report.max_ulps} "
                            f"ULP{sign})")
        return
    out.check(T4, False, f"{mismatches} cells differ from {path}, largest {report.max_ulps} ULP"
              + (f" (> {ulps})" if ulps else "") + (f", {report.nonfinite} non-finite" if report.nonfinite else "")
              + sign)


def selftest_variants() -> tuple[Variant, ...]:
    """With the dask extra installed, the selftest proves the gate and every fault on Dask too (one shared
    LocalCluster of 2 workers for those runs)."""
    if not dask_available():
        return ()

    def one_cluster():
        from nxgates.core.pool.dask import session_cluster

        return session_cluster()

    return (Variant("dask", {"executor": "dask", "workers": 2}, one_cluster),)
