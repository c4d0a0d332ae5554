"""Data-parallel SGD bit-identical to serial SGD: parallel-grad's "integrate into the trainer's batch loop".

parallel-grad proves one batch of per-example gradients; this gate trains with them. The MLP and data are
parallel-grad's (the seed's formulas). Each of ``steps`` steps computes the B per-example gradients (on the
worker pool, or serially), reduces them into the batch gradient by the fixed pairwise tree over the
examples (:func:`nxgates.core.train.batch_mean`: the order depends only on B), divides by float32(B) and
updates ``w -= lr * g`` in float32, ``lr = constf(lr_num, lr_den)``. The batch streams: the examples are
computed in chunks, in the order a depth-first walk of that tree meets them, and added as they come
(:func:`nxgates.core.train.streamed_batch_mean`, the same bits), so memory holds two chunks of rows and one
row per round of the tree, never B rows. The weights live in pool shared memory and are updated in place
between steps, so forked workers always read the current step's weights.
A remote pool (dask) gets the job once and each step's weights as one more shared object; its tasks
return their gradient row and loss.

* D1 the weights after every step are bit-identical between serial and data-parallel training.
* D2 bit-identical between two worker counts (``workers`` and one more).
* D3 the mean loss falls: the last step's loss < the first step's (every step printed).
* D4 step 0's batch gradient matches float64 central differences (:func:`nxgates.core.numeric.mlp_numeric`
  and ``compare``, as ta-gradcheck), over the first ``d4_examples`` examples of the batch (0 = all B).
"""

from nxgates.gates.dp_train.gate import AUTO_EXECUTOR, D1, D2, D3, D4, FAULTS, GATE, PARAMS, run, validate
from nxgates.gates.dp_train.training import SgdTrainer, TrainingJob, TrainingRun, finish_order

__all__ = ["AUTO_EXECUTOR", "D1", "D2", "D3", "D4", "FAULTS", "GATE", "PARAMS", "SgdTrainer", "TrainingJob",
           "TrainingRun", "finish_order", "run", "validate"]
