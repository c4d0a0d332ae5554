"""The deadline holds for any gate, and a plugin's mistakes are named as its own.
``--timeout`` stops a gate that never calls ``ctx.check_time()`` (asleep or busy); a plugin's ``print()``
does not corrupt ``--json -``; returning the wrong type, numpy scalars or NaN in metrics, or a digest that
raises, are that gate's errors (exit 1, the gate named, the report written as strict JSON), not exit 3."""

from __future__ import annotations

import json

import pytest

from tests.behaviour.from_outside import GREEN_BODY, plugin_source


def strict_json(text: str):
    """JSON as RFC 8259 has it: NaN and Infinity are not JSON."""
    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


# ---- 7. --timeout holds for any gate -----------------------------------------------------------------

SLEEPER = "import time\ntime.sleep(40)\n" + GREEN_BODY
SPINNER = "while True:\n    pass\n" + GREEN_BODY


@pytest.mark.parametrize("body", [SLEEPER, SPINNER], ids=["sleeps", "busy-loops"])
def test_timeout_stops_a_gate_that_never_checks_the_time(plugins, body):
    env = plugins(stuck=plugin_source(body))
    r = env.run("run", "stuck", "--timeout", "0.5", "--json", "r.json", timeout=11)
    assert r.seconds < 10 and r.returncode == 1, (r.returncode, r.seconds, r.stderr)
    assert "timed out" in r.stdout + r.stderr and "Traceback" not in r.stderr
    gate = strict_json((env.cwd / "r.json").read_text())["gates"][0]
    assert gate["passed"] is False


# ---- 10. a plugin's mistakes are its own -------------------------------------------------------------


def test_a_plugins_print_does_not_corrupt_json_on_stdout(plugins):
    env = plugins(chatty=plugin_source('print("hello from the plugin")\n' + GREEN_BODY))
    r = env.run("run", "chatty", "--json", "-")
    assert r.returncode == 0, r.stderr
    assert strict_json(r.stdout)["gates"][0]["name"] == "chatty"


def with_metrics(metrics: str) -> str:
    return GREEN_BODY.replace("return out", f"import numpy as np\nout.metrics = {metrics}\nreturn out")


MISTAKES = {
    "returns-none": ("return None\n", []),
    "returns-dict": ('return {"c1": True}\n', []),
    "numpy-metrics": (with_metrics('{"n": np.int64(3), "x": np.float32(0.5), "ok": np.bool_(True)}'), []),
    "digest-raises": (GREEN_BODY.replace("return out", "def digest():\n    raise RuntimeError('no digest')\n"
                                         "out.digest = digest\nreturn out"), ["--repeat", "2"]),
}


@pytest.mark.parametrize("kind", sorted(MISTAKES))
def test_a_plugins_mistake_is_its_gates_error(plugins, kind):
    body, extra = MISTAKES[kind]
    env = plugins(sloppy=plugin_source(body), good=plugin_source(GREEN_BODY))
    r = env.run("run", "sloppy", "good", "--json", "r.json", *extra)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert any("sloppy" in line for line in (r.stdout + r.stderr).splitlines() if "error" in line.lower()
               or "FAIL" in line), r.stdout + r.stderr
    gates = {g["name"]: g for g in strict_json((env.cwd / "r.json").read_text())["gates"]}
    assert gates["sloppy"]["passed"] is False and gates["sloppy"]["error"]
    assert gates["good"]["passed"] is True


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "-float('inf')"])
def test_non_finite_metrics_still_make_a_strict_json_report(plugins, value):
    env = plugins(odd=plugin_source(with_metrics(f'{{"x": {value}, "xs": [1.0, {value}]}}')))
    r = env.run("run", "odd", "--json", "r.json")
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    strict_json((env.cwd / "r.json").read_text())
    r = env.run("run", "odd", "--json", "-")
    strict_json(r.stdout)
