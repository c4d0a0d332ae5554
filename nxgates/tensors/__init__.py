"""A gate's input tensors in and out (``nxgates export``, ``run --inputs``) and another implementation's
gradients compared cell by cell (``--compare-grads``). Imported only when one of those is asked for."""
