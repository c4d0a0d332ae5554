"""A PyTorch model behind the invariance gate's contract: numpy arrays in, tensors inside, numpy out.

``nxgates run invariance --target examples/invariance/torch_adapter.py:forward --inputs mlp.npz
--set static=W1,b1,W2,b2`` checks the model's rows as the gate checks any callable's. The tensors are
copies of the gate's arrays (its arrays are read-only), on the CPU, float32.
"""

from __future__ import annotations

import numpy as np
import torch


def model(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor
          ) -> torch.Tensor:
    """The MLP of mlp_rowloop.py, batched as PyTorch runs it: logits = W2 relu(W1 x + b1) + b2."""
    hidden = torch.relu(torch.nn.functional.linear(x, W1, b1))
    return torch.nn.functional.linear(hidden, W2, b2)


def forward(X: np.ndarray, W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, b2: np.ndarray) -> dict[str, np.ndarray]:
    """numpy -> torch -> numpy: the logits of every row of X."""
    tensors = [torch.tensor(np.array(a)) for a in (X, W1, b1, W2, b2)]
    with torch.no_grad():
        logits = model(*tensors)
    return {"logits": logits.numpy()}
