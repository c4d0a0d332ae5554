"""What the gate calls and with what: SPEC loading, the arrays' contract (usage errors before any call), and
a target that raises, answers wrongly or never returns (the gate's error, or a timeout)."""

import sys
import textwrap
import time

import numpy as np
import pytest

from nxgates.errors import ConfigError
from nxgates.gates.invariance import CHECKS, I1, I2, I3, I5
from nxgates.gates.invariance.builtin import seed_arrays
from nxgates.gates.invariance.target import FILE_MODULE_PREFIX, load_target
from nxgates.runner import exit_code, run_gate

TARGETS = '''
import threading
import time

import numpy as np

CALLS = []
BUFFER = np.empty((64, 4), np.float32)


def double(X, W=None):
    CALLS.append(X.shape[0])
    return X * 2


def pair(X):
    return X * 2, (X > 0).sum(axis=1)


def raises_alone(X):
    if X.shape[0] == 1:
        raise ValueError("one row is not enough")
    return X * 2


def raises_in_a_worker(X):
    if threading.current_thread().name.startswith("nxgates-worker"):
        raise KeyError("no cache on this thread")
    return X * 2


def short(X):
    return X[:-1] if X.shape[0] > 3 else X


def writes(X):
    X[0] = 1
    return X


def hangs(X):
    if X.shape[0] == 1:
        open(__file__ + ".hung", "w").close()
        time.sleep(60)
    return X


def hangs_in_a_worker(X):
    if threading.current_thread().name.startswith("nxgates-worker"):
        time.sleep(2)
    return X


def wider_alone(X):
    return X.astype(np.float64) if X.shape[0] == 1 else X


def renamed_in_a_worker(X):
    return {"z": X} if threading.current_thread().name.startswith("nxgates-worker") else {"y": X}


def reuses_a_buffer(X):
    BUFFER[: X.shape[0]] = X * 2
    return BUFFER[: X.shape[0]]


def batch_norm(X):
    return X - X.mean(axis=0)


def noisy(X):
    return X + np.random.default_rng().integers(0, 2, X.shape).astype(X.dtype) * np.float32(1e-6)


class Model:
    @staticmethod
    def forward(X):
        return {"y": X * 3}


NOT_CALLABLE = 3
'''


@pytest.fixture
def targets(tmp_path):
    path = tmp_path / "targets.py"
    path.write_text(textwrap.dedent(TARGETS))
    return path


@pytest.fixture
def arrays():
    return {"X": np.arange(32, dtype=np.float32).reshape(8, 4) - 10}


def run(entry, targets, name, arrays, timeout=60, **params):
    return run_gate(entry, {**entry.defaults, **params}, options={"target": f"{targets}:{name}", "inputs": arrays},
                    timeout=timeout)


def verdicts(report):
    return {c.name: c.passed for c in report.output.checks}


# ---- loading a SPEC ---------------------------------------------------------------------------------------


def test_a_file_is_loaded_under_its_own_module_name_and_its_folder_stays_off_sys_path(targets):
    path_before = list(sys.path)
    fn = load_target(f"{targets}:double")
    assert sys.path == path_before and str(targets.parent) not in sys.path
    assert fn.__module__.startswith(FILE_MODULE_PREFIX + "targets_")
    assert "targets" not in sys.modules
    assert fn(X=np.ones((2, 1), np.float32)).tolist() == [[2.0], [2.0]]


def test_two_files_of_one_name_are_two_modules(tmp_path):
    for folder, factor in (("a", 2), ("b", 3)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.py").write_text(f"def f(X):\n    return X * {factor}\n")
    fa, fb = load_target(f"{tmp_path / 'a' / 'model.py'}:f"), load_target(f"{tmp_path / 'b' / 'model.py'}:f")
    assert fa.__module__ != fb.__module__ and (fa(2), fb(2)) == (4, 6)


def test_a_module_spec_and_a_dotted_attribute(targets):
    assert load_target("nxgates.gates.invariance.builtin:mlp_grads").__name__ == "mlp_grads"
    assert load_target(f"{targets}:Model.forward")(np.ones(1))["y"].tolist() == [3.0]


@pytest.mark.parametrize("spec, message", [
    ("no-colon", "expected package.module:callable or path/to/file.py:callable"),
    ("{dir}/missing.py:f", "no such file"),
    ("{dir}/broken.py:f", "cannot import {dir}/broken.py: RuntimeError: broken at import"),
    ("{dir}/targets.py:nope", "has no attribute 'nope'"),
    ("{dir}/targets.py:NOT_CALLABLE", "NOT_CALLABLE is not callable (it is of type int)"),
    ("no_such_package.module:f", "cannot import no_such_package.module: ModuleNotFoundError"),
])
def test_a_spec_naming_no_callable_is_a_usage_error_before_any_call(entry, targets, arrays, spec, message):
    (targets.parent / "broken.py").write_text("raise RuntimeError('broken at import')\n")
    spec, message = spec.format(dir=targets.parent), message.format(dir=targets.parent)
    with pytest.raises(ConfigError, match="^--target ") as exc:
        run_gate(entry, entry.defaults, options={"target": spec, "inputs": arrays})
    assert message in str(exc.value) and "\n" not in str(exc.value)


# ---- the arrays' contract ---------------------------------------------------------------------------------


@pytest.mark.parametrize("given, params, message", [
    ({"X": np.ones((8, 2)), "W": np.ones(3)}, {"static": "W3"}, "has no array 'W3' (arrays: X, W)"),
    ({"X": np.ones((8, 2)), "Y": np.ones((6, 2))}, {}, "batched arrays 'X' (8 rows) and 'Y' (6 rows) differ"),
    ({"X": np.ones((8, 2))}, {"static": "X"}, "every array of --inputs is static"),
    ({"X": np.ones((1, 2))}, {}, "the batch has 1 row(s)"),
    ({"X": np.ones((8, 2)), "s": np.float32(2)}, {}, "array 's' is a scalar: name it in static="),
])
def test_arrays_the_contract_cannot_call_are_a_usage_error_before_any_call(entry, targets, given, params, message):
    fn = load_target(f"{targets}:double")
    calls = sys.modules[fn.__module__].CALLS
    with pytest.raises(ConfigError) as exc:
        run_gate(entry, {**entry.defaults, **params}, options={"target": f"{targets}:double",
                                                               "inputs": {k: np.asarray(v) for k, v in given.items()}})
    assert message in str(exc.value)
    assert calls == []


def test_a_target_without_inputs_is_a_usage_error(entry, targets):
    with pytest.raises(ConfigError, match="give --inputs F.npz"):
        run_gate(entry, entry.defaults, options={"target": f"{targets}:double"})


def test_the_built_in_target_takes_its_own_arrays_and_static_names_only(entry):
    with pytest.raises(ConfigError, match="the built-in target takes arrays W1, W2, X, T"):
        run_gate(entry, entry.defaults, options={"inputs": {"X": np.ones((8, 2), np.float32)}})
    with pytest.raises(ConfigError, match="the built-in target's static arrays are W1,W2"):
        run_gate(entry, {**entry.defaults, "static": "X"})
    given = seed_arrays(entry.defaults)
    assert run_gate(entry, {**entry.defaults, "static": "W2,W1"}, options={"inputs": given}, timeout=60).passed
    assert given["X"].flags.writeable  # the gate made read-only views, not read-only arrays of the caller's


def test_the_built_in_target_by_its_spec_is_the_default_run(entry):
    spec = "nxgates.gates.invariance.builtin:mlp_grads"
    given = seed_arrays(entry.defaults)
    named = run_gate(entry, {**entry.defaults, "static": "W1,W2"}, options={"target": spec, "inputs": given},
                     timeout=60)
    default = run_gate(entry, entry.defaults, timeout=60)
    assert named.passed and default.passed
    assert named.output.fingerprints == default.output.fingerprints


@pytest.mark.parametrize("name, outputs", [("double", {"out"}), ("pair", {"[0]", "[1]"}), ("Model.forward", {"y"})])
def test_one_array_a_tuple_or_a_dict_of_outputs(entry, targets, arrays, name, outputs):
    report = run(entry, targets, name, arrays)
    assert report.passed and set(report.output.metrics["outputs"]) == outputs


def test_outputs_are_copied_so_a_reused_buffer_cannot_hide_or_fake_a_difference(entry, targets, arrays):
    assert run(entry, targets, "reuses_a_buffer", arrays).passed


# ---- the target's own errors: the gate's error (exit 1), never a verdict ------------------------------------


def test_a_target_that_raises_is_a_gate_error_naming_its_rows(entry, targets, arrays):
    report = run(entry, targets, "raises_alone", arrays)
    assert report.error_kind == "gate" and exit_code([report]) == 1
    assert "target raised ValueError: one row is not enough (call on rows 0..0 of 8)" in report.error


def test_a_target_that_raises_on_a_pool_worker_names_the_worker(entry, targets, arrays):
    report = run(entry, targets, "raises_in_a_worker", arrays)
    assert report.error_kind == "gate"
    assert "target raised KeyError: 'no cache on this thread' (call on rows 0..1 of 8, worker 0)" in report.error


def test_an_output_of_the_wrong_length_is_a_gate_error(entry, targets, arrays):
    report = run(entry, targets, "short", arrays)
    assert report.error_kind == "gate"
    assert ("target broke the contract on rows 0..7 of 8: output 'out' has shape (7, 4): its leading axis must "
            "be the 8 rows given") in report.error


@pytest.mark.parametrize("name, message", [
    ("wider_alone", "target returned out float64 (n, 4) for rows 0..0 of 8, but out float32 (n, 4) before"),
    ("renamed_in_a_worker", "target returned z float32 (n, 4) for rows 0..1 of 8 (worker 0), but y float32 (n, 4) "
                            "before"),
])
def test_outputs_that_change_names_dtypes_or_shapes_between_calls_are_a_gate_error(entry, targets, arrays, name,
                                                                                    message):
    report = run(entry, targets, name, arrays)
    assert report.error_kind == "gate" and message in report.error


def test_a_target_that_writes_into_its_inputs_is_a_gate_error(entry, targets, arrays):
    report = run(entry, targets, "writes", arrays)
    assert report.error_kind == "gate" and "assignment destination is read-only" in report.error
    assert arrays["X"].flags.writeable  # the caller's array itself is left writable


def test_a_call_that_never_returns_is_stopped_by_the_timeout(entry, targets, arrays):
    """Stopped inside the call (its first single-row call, a few milliseconds into the run), not before it."""
    t0 = time.monotonic()
    report = run(entry, targets, "hangs", arrays, timeout=0.5)
    assert report.error_kind == "timeout" and time.monotonic() - t0 < 5
    assert targets.with_name(targets.name + ".hung").exists()


def test_a_pool_call_that_does_not_return_in_time_is_a_timeout(entry, targets, arrays):
    t0 = time.monotonic()
    report = run(entry, targets, "hangs_in_a_worker", arrays, timeout=0.5)
    assert report.error_kind == "timeout" and time.monotonic() - t0 < 1.5


# ---- targets that are wrong by themselves -------------------------------------------------------------------


def test_a_norm_across_the_batch_fails_i1_i2_and_i3(entry, targets, arrays):
    report = run(entry, targets, "batch_norm", arrays)
    failed = {name for name, ok in verdicts(report).items() if not ok}
    assert failed == {I1, I2, I3}
    (i1,) = [c for c in report.output.checks if c.name == I1]
    assert i1.detail.startswith("row 0 output 'out' [0]: in batch=-14.0 alone=0.0 (")


def test_noise_from_an_unseeded_generator_fails_i5(entry, targets, arrays):
    report = run(entry, targets, "noisy", arrays)
    assert report.error is None and not verdicts(report)[I5]


def test_a_correct_target_passes_every_check(entry, targets, arrays):
    assert verdicts(run(entry, targets, "double", arrays)) == {name: True for name in CHECKS}
