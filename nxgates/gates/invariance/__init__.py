"""A user's own Python callable held to batch invariance, parallel == serial and determinism.

``nxgates run invariance --target SPEC --inputs F.npz [--set static=W1,W2]``: the callable (SPEC is
``package.module:callable`` or ``path/to/file.py:callable``, :mod:`.target`) is called with the archive's
arrays as keywords, the static ones whole and every other one sliced by rows on axis 0. Its outputs (one
array, or a dict or tuple of them, one row per row given) are compared cell by cell, floats within ``--ulp``
ULPs (default 0: the same value), everything else exactly (:mod:`.compare`).

* I1 each row called alone gives its cells of the whole batch's call.
* I2 the batch called in consecutive chunks of each size in ``splits`` gives the whole batch's call.
* I3 the batch permuted, and each row among other rows drawn from the batch, give the same rows.
* I4 the chunks called on a worker pool (two passes, more than one worker) give the serial calls' bits.
* I5 every serial call, made ``repeat`` times, gives the same bits each time.

Without ``--target`` the gate checks nxgates' own f32 per-example gradients on its seeded batch
(:mod:`.builtin`), so ``run all`` and the selftest hold it too.
"""

from nxgates.gatekit import GateDef
from nxgates.gates.invariance.checks import CHECKS, I1, I2, I3, I4, I5
from nxgates.gates.invariance.faults import FAULTS
from nxgates.gates.invariance.gate import PARAMS, run, validate

GATE = GateDef(
    params=PARAMS,
    checks=CHECKS,
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("target", "inputs", "ulp"),
)

__all__ = ["CHECKS", "FAULTS", "GATE", "I1", "I2", "I3", "I4", "I5", "PARAMS", "run", "validate"]
