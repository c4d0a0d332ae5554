"""The LoRA model the lora gates share: the seed's initial tensors, in C's integer arithmetic."""

import numpy as np

from nxgates.core import lora as core_lora


def test_init_uses_c_division():
    m = core_lora.init_model(3, 6, 2)
    # x[0] = ((2 % 11) - 5) * S / 10 = -3S/10 -> -314572 in C (floor would give -314573)
    assert int(m.x[0, 0]) == -314572
    assert m.W.dtype == np.int64
