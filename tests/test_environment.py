"""Where a run's numbers came from: the fields, their fallbacks, and the lines that say how two differ."""

import builtins
import platform

import numpy as np

from nxgates import __version__, environment


def test_the_machine_names_nxgates_python_numpy_blas_os_and_cpu():
    env = environment.machine()
    assert list(env) == ["nxgates", "python", "numpy", "blas", "os", "cpu"]
    assert env["nxgates"] == __version__ and env["numpy"] == np.__version__
    assert platform.python_version() in env["python"] and all(isinstance(v, str) and v for v in env.values())


def test_blas_comes_from_numpys_build_report(monkeypatch):
    config = {"Build Dependencies": {"blas": {"name": "openblas", "version": "0.3.9", "found": True}}}
    monkeypatch.setattr(np, "show_config", lambda mode="stdout": config)
    assert environment.blas() == "openblas 0.3.9"
    monkeypatch.setattr(np, "show_config", lambda mode="stdout": {})
    assert environment.blas() == "unknown"


def test_an_older_numpy_falls_back_to_its_config_module(monkeypatch):
    def prints_only():
        return None

    monkeypatch.setattr(np, "show_config", prints_only)  # no mode argument: TypeError
    monkeypatch.setattr(np.__config__, "blas_opt_info", {"libraries": ["openblas"]}, raising=False)
    assert environment.blas() == "blas_opt_info: openblas"


def test_the_cpu_model_falls_back_to_platform_without_proc_cpuinfo(monkeypatch):
    real_open = builtins.open

    def no_cpuinfo(path, *args, **kwargs):
        if path == "/proc/cpuinfo":
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_cpuinfo)
    monkeypatch.setattr(platform, "processor", lambda: "test-cpu")
    assert environment.cpu_model() == "test-cpu"


def test_execution_prefers_what_the_gate_used_to_what_it_was_asked():
    assert environment.execution({"executor": "auto", "workers": 0}, {"executor": "process"}) == {
        "executor": "process", "workers": 0}
    assert environment.execution({"N": 1}, {}) == {}


def test_differences_are_one_line_per_field():
    old = {"numpy": "1.26", "blas": "x", "gates": [1]}
    new = {"numpy": "2.0", "blas": "x", "cpu": "c", "gates": [2]}
    assert list(environment.differences(old, new)) == ["environment numpy: 1.26 -> 2.0",
                                                       "environment cpu: (none) -> c"]
