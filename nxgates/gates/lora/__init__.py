"""LoRA gradcheck in Q20 integers: the seed ``nx_intfp_lora_gradcheck_gate.nx``, number for number.

Model (:mod:`nxgates.core.lora`): ``y = x@W + (x@A)@B`` with the base ``W`` frozen and the adapter ``A``
(DM x R), ``B`` (R x DM) trainable; loss ``L = sum y^2`` (left in Q40, as the seed). The analytic adapter
gradients are checked against central differences, cell by cell. Two gradcheck algorithms give the same
integers:

* ``naive`` is the seed's (:mod:`.gradcheck`): a whole forward per perturbation, O(T*DM^2) each,
  2*ncell of them.
* ``fast`` (:mod:`.fast`) re-divides only what a perturbation moves, in O(T*DM) per perturbation; its
  cells can be dealt over a worker pool (:mod:`.pooled`).

:mod:`.gate` is the gate itself (report, checks, faults), :mod:`.footprint` its memory estimate, and
:mod:`.seedlog` the seed's print format, for ``nxgates crosscheck``.
"""

from nxgates.gates.lora.gate import CHECK_A, CHECK_B, CHECK_FROZEN, GATE, PARAMS

__all__ = ["CHECK_A", "CHECK_B", "CHECK_FROZEN", "GATE", "PARAMS"]
