"""What the gate checks: the callable a ``--target`` SPEC names, and the arrays of ``--inputs``.

A SPEC is ``package.module:callable`` (imported from ``sys.path``, as ``import`` would) or
``path/to/file.py:callable``; the callable may be a dotted attribute path (``Model.forward``). A file is
loaded as pytest's importlib mode loads a test file: under a module name of its own, and its folder is
never put on ``sys.path``. Anything that stops the callable from being found is one line and exit 2,
before any call.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from nxgates.errors import ConfigError
from nxgates.safeio import regular_file

#: the prefix of the module name a target file is loaded under
FILE_MODULE_PREFIX = "nxgates_invariance_target_"


def load_target(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` names; a :class:`ConfigError` saying why when there is none."""
    where = f"--target {spec}"
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise ConfigError(f"{where}: expected package.module:callable or path/to/file.py:callable")
    is_file = module_part.endswith(".py") or os.sep in module_part or "/" in module_part
    module = _load_file(module_part, where) if is_file else _import(module_part, where)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{where}: {module_part} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ConfigError(f"{where}: {attr} is not callable (it is of type {type(obj).__name__})")
    return obj


def _import(name: str, where: str) -> Any:
    try:
        return importlib.import_module(name)
    except (Exception, SystemExit) as exc:  # the module's own error, whatever it is: the user's to fix
        raise ConfigError(f"{where}: cannot import {name}: {_said(exc)}") from None


def _load_file(path: str, where: str) -> Any:
    """Execute the file as a module of its own name (from its real path: one file, one module)."""
    regular_file(path, "--target")
    real = os.path.realpath(path)
    stem = "".join(ch if ch.isalnum() else "_" for ch in os.path.splitext(os.path.basename(real))[0])
    name = f"{FILE_MODULE_PREFIX}{stem}_{hashlib.sha256(real.encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, real)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{where}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: dataclasses and pickling look their module up there
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise ConfigError(f"{where}: cannot import {path}: {_said(exc)}") from None
    return module


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ByValue:
    """A target loaded from a file, on its way to another process that cannot import its module (a Dask
    worker): pickled with its module's code, it unpickles as the callable itself."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn

    def __reduce__(self) -> tuple:
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[self.fn.__module__])
        return cloudpickle.loads, (cloudpickle.dumps(self.fn),)


def portable(fn: Callable[..., Any]) -> Any:
    """What pickles ``fn`` for another process: by value when it comes from a target file, else itself."""
    module = getattr(fn, "__module__", None) or ""
    return ByValue(fn) if module.startswith(FILE_MODULE_PREFIX) and module in sys.modules else fn


