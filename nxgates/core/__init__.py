"""Shared numerical core: the f32 tape autograd, the worker pool and the Q20 integer kernels."""
