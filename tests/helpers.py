"""Helpers shared by test modules (a test module never imports another): each gate's section below."""

from nxgates.gatekit import RunContext
from tests.oracles.seed_lora import seed_lora


def ctx(params, fault=None, **options):
    """A run context for calling a gate's ``run`` directly, as the runner would."""
    return RunContext(params=dict(params), fault=fault, options=options)


# lora


def metrics_like_seed(out):
    """The lora gate's JSON metrics, narrowed to the fields :func:`reference` has."""
    m = out.metrics
    return {"loss_q": m["loss_q"], **{k: {f: m[k][f] for f in ("passed", "cells", "worst_permil",
            "max_abs_grad", "analytic", "numeric")} for k in ("A", "B")}}


def reference(T, DM, R, delta=2097, tol=70):
    """The seed transcription's gradcheck, in :func:`metrics_like_seed`'s shape."""
    r = seed_lora(T, DM, R, delta, tol)
    for key in ("A", "B"):
        r[key].pop("npass")
    return r


#: a size other than the seed's (an odd width), the lora report tests' default
ODD = {"T": 2, "DM": 5, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def lines(out, level="info"):
    """The texts of a gate output's lines at ``level``."""
    return [i.text for i in out.lines() if getattr(i, "level", None) == level]


def checks(out):
    """A gate output's checks by name: (passed, detail)."""
    return {c.name: (c.passed, c.detail) for c in out.checks}
