"""The seed's LoRA model in Q20 integers and its gradcheck, shared by the lora and lora-train gates.

``model`` is the seed's initialisation, forward and backward; ``params`` the model's parameters, declared
once; ``gradcheck`` judges the adapter's gradients against central differences, by the seed's algorithm or
the exact fast one (``fast``), in one process or over a pool (``pooled``); ``footprint`` sizes its memory.
"""

from nxgates.core.lora.model import Forward, Model, backward, forward, init_model

__all__ = ["Forward", "Model", "backward", "forward", "init_model"]
