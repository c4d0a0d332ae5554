"""Data-parallel per-example gradients, bit-identical to serial: the seed ``nx_ta_parallel_grad_gate.nx``.

An MLP ``x -> W1 (H x D) -> relu -> W2 (O x H) -> mse(target)`` is differentiated per example on a
private f32 tape, first serially, then as B tasks on a worker pool. Because every kernel has a fixed
reduction order (:mod:`nxgates.core.tape`), any race, arena collision or shared state shows up as a
flipped bit.

* T1 parallel per-example gradients == serial, raw float32 bits, and the comparison is not vacuous
  (more non-zero cells than one example has).
* T2 the pool completed all B tasks *and* they ran on more than one distinct worker.
* T3 a parallel re-run on the same arenas is bit-identical.
* T4 (with ``--compare-grads``) bit-identical to a saved ``.npy`` or another implementation's raw ``.bin``
  (``--ulp N``: within N ULPs); where they differ, a report per tensor, in ULPs (:mod:`nxgates.core.ulp`).

``reduction`` chooses the order of every sum (``tree``, or ``sequential`` as a plain loop sums); ``--inputs``
runs on given weights and batch instead of the seed's formulas.

Arenas are per worker (reset per example), and the batch streams through in chunks of a few examples per
worker (serial rows, parallel pass, re-run, compare, fold into the counts and one sha256 in example order),
so memory grows with the worker count and NP, not with B. The re-run's tasks do the bit comparisons (the
first pass's row against the serial row, their own row against the first pass's, while it is in the cache);
rows no task compared (a lost task, rows returned by a remote worker) are compared by the gate.
"""

from nxgates.gatekit import GateDef, SeedLog
from nxgates.gates.parallel_grad.checks import CHECKS, T1, T2, T3, T4
from nxgates.gates.parallel_grad.faults import FAULTS
from nxgates.gates.parallel_grad.gate import AUTO_EXECUTOR, PARAMS, footprint_bytes, run, selftest_variants, validate
from nxgates.tensors.mlp_spec import MLP_INPUTS


def _seed_log() -> SeedLog:
    """The seed's log format, for ``nxgates crosscheck`` (imported only there)."""
    from nxgates.gates.parallel_grad.seedlog import SEED_LOG

    return SEED_LOG


GATE = GateDef(
    params=PARAMS,
    checks=CHECKS,
    optional_checks=(T4,),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("save_grads", "compare_grads", "scheduler", "inputs", "ulp"),
    selftest_variants=selftest_variants,
    seed_log=_seed_log,
    inputs=MLP_INPUTS,
)

__all__ = ["AUTO_EXECUTOR", "FAULTS", "GATE", "PARAMS", "T1", "T2", "T3", "T4",
           "footprint_bytes", "run", "validate"]
