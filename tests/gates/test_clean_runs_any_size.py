"""A clean run of a built-in gate at any sizes its parameter ranges admit is GREEN, or refused with a usage
error (exit 2) that says why; never RED for nothing the user broke. Sizes start at each range's smallest
and stay small enough that one example runs well under a second."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates import registry
from nxgates.errors import NxError
from nxgates.runner import run_gate

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def entry(name):
    return registry.load(registry.PACKAGED_CONFIG).gates[name]


def lora_sizes(tokens=8, width=24):
    """T, DM and R <= DM, from 1 up."""
    return st.tuples(st.integers(1, tokens), st.integers(1, width)).flatmap(
        lambda td: st.integers(1, td[1]).map(lambda r: {"T": td[0], "DM": td[1], "R": r}))


def mlp_sizes(width=24, out=8, batch=(2, 12)):
    return st.fixed_dictionaries({"D": st.integers(1, width), "H": st.integers(1, width), "O": st.integers(1, out),
                                  "B": st.integers(*batch)})


def assert_green_or_refused(name, sizes):
    e = entry(name)
    params = {**e.defaults, **sizes}
    try:
        e.gate.validate(params)
        report = run_gate(e, params)
    except NxError as exc:  # refused: a usage error with its reason (exit 2)
        assert str(exc).strip() and "\n" not in str(exc).strip(), exc
        return
    failed = [f"{c.name}: {c.detail}" for c in report.output.checks if not c.passed]
    assert report.error is None and report.passed, (name, sizes, report.error, failed)


@SETTINGS
@given(lora_sizes())
def test_lora(sizes):
    assert_green_or_refused("lora", sizes)


@SETTINGS
@given(lora_sizes(), st.integers(1, 10))
def test_lora_train(sizes, steps):
    assert_green_or_refused("lora-train", {**sizes, "steps": steps})


@SETTINGS
@given(mlp_sizes(batch=(2, 16)))
def test_parallel_grad(sizes):
    assert_green_or_refused("parallel-grad", sizes)


@SETTINGS
@given(mlp_sizes(batch=(1, 8)))
def test_ta_gradcheck(sizes):
    assert_green_or_refused("ta-gradcheck", sizes)


@SETTINGS
@given(mlp_sizes(width=16, out=6, batch=(2, 8)), st.integers(2, 5))
def test_dp_train(sizes, steps):
    assert_green_or_refused("dp-train", {**sizes, "steps": steps})
