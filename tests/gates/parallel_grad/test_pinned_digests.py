"""The digests of the tape's gates, pinned: parallel-grad's per-example gradients and dp-train's trained
weights at the seed, medium and odd sizes, on the thread and process executors. Any change to how the tape
computes (recording, replaying, layouts, chunking) must leave every bit of these as it is."""

import pytest

from nxgates.gates import dp_train, parallel_grad
from tests.helpers import ctx

SIZES = {"seed": (8, 16, 4, 8), "medium": (256, 128, 10, 64), "odd-5-3-2": (5, 3, 2, 7), "odd-13-7-3": (13, 7, 3, 11)}

GRADS_SHA256 = {
    "seed": "3814f0647e698ab85f962a8cd3131eb7945b24dbeaa63924daabc93b0117ae71",
    "medium": "13cf99a909d1c771941b32f609089f44bb177738596ed400e0461c5b5955ef35",
    "odd-5-3-2": "80a354d8b4ea2565cbc21ab8757d2b9532044a7a1e106cc49061d9ad3a5c3a94",
    "odd-13-7-3": "fa8058245f37c34e4546bc84fc5fd97802d744e3f5c0f54efafad51ec8eeb301",
}

#: (weights after every step, the mean losses' float32 values as float.hex)
WEIGHTS_SHA256 = {
    "seed": ("8a3cbef64467edb7f9045f83b9d6a4426e150ce83a0ba3b748b9c346b1a93ae8",
             ["0x1.1027a40000000p-1", "0x1.8aa5400000000p-2", "0x1.2586a40000000p-2", "0x1.bf296e0000000p-3",
              "0x1.5c75580000000p-3"]),
    "medium": ("aa7409814c3ffc01d5a4f3e73a4a0d92a85c9c1c499db4454a5b749b5943a1a8",
               ["0x1.61082c0000000p+8", "0x1.04fb740000000p+8", "0x1.9007c00000000p+7", "0x1.3a4a500000000p+7",
                "0x1.f74ebc0000000p+6"]),
    "odd-5-3-2": ("3a04619669447bfb82c567a893c572823fcc35569627131641aa1754b2287b46",
                  ["0x1.2bdb240000000p-2", "0x1.1743960000000p-2", "0x1.061bba0000000p-2", "0x1.ef463c0000000p-3",
                   "0x1.d699be0000000p-3"]),
    "odd-13-7-3": ("387318fe872c5cd07e3776b1147d351bd6053a76834a1a239ec15d6b3d3bf433",
                   ["0x1.8bca2c0000000p-4", "0x1.656aac0000000p-4", "0x1.541e240000000p-4", "0x1.4a79a00000000p-4",
                    "0x1.43c9b80000000p-4"]),
}

#: the dp-train parameters of the packaged table, per size (medium: its preset)
DP_TRAIN = {"steps": 5, "lr_num": 1, "lr_den": 8, "workers": 0, "step_exp": 6, "tol_permil": 10, "d4_examples": 0}
DP_TRAIN_MEDIUM = {"lr_den": 256, "d4_examples": 16}


def dims_of(size: str) -> dict:
    return dict(zip("DHOB", SIZES[size], strict=True))


@pytest.mark.parametrize("executor", ["thread", "process"])
@pytest.mark.parametrize("size", list(SIZES))
def test_parallel_grad_gradients_are_the_pinned_bits(size, executor):
    out = parallel_grad.run(ctx({**dims_of(size), "workers": 0, "executor": executor}))
    assert all(c.passed for c in out.checks)
    assert out.metrics["grads_sha256"] == GRADS_SHA256[size]


@pytest.mark.parametrize("executor", ["thread", "process"])
@pytest.mark.parametrize("size", list(SIZES))
def test_dp_train_weights_and_losses_are_the_pinned_bits(size, executor):
    params = {**DP_TRAIN, **(DP_TRAIN_MEDIUM if size == "medium" else {}), **dims_of(size), "executor": executor}
    out = dp_train.run(ctx(params))
    assert all(c.passed for c in out.checks)
    weights, losses = WEIGHTS_SHA256[size]
    assert out.metrics["weights_sha256"] == weights
    assert [float(v).hex() for v in out.metrics["losses"]] == losses
