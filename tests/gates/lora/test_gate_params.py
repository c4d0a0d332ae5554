"""The lora gate's parameters at work: which gradcheck path each choice takes, with which arguments, the
refusal a guard turns into, and the per-cell lines and digest the report derives from the verdicts."""

import hashlib

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.lora import gradcheck, pooled
from nxgates.core.lora.gradcheck import Gradcheck
from nxgates.errors import ConfigError, ResourceError
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ODD, ctx


@pytest.fixture
def paths(monkeypatch):
    """Records which gradcheck path the gate takes, and with what; each path gives the in-process integers."""
    calls = []
    real = gradcheck.adapter_diffs

    def in_process(m, f, delta, c, algorithm):
        calls.append(("in-process", algorithm, delta))
        return real(m, f, delta, c, "fast")

    def pooled_path(m, f, delta, c, workers, executor="process", scheduler=None):
        calls.append(("pooled", workers, executor, scheduler, delta))
        return real(m, f, delta, c, "fast")

    monkeypatch.setattr(gradcheck, "adapter_diffs", in_process)
    monkeypatch.setattr(pooled, "diffs_fast_pooled", pooled_path)
    return calls


def _run(**params):
    options = params.pop("options", {})
    return lora_gate.run(ctx({**ODD, **params}, **options))


def test_one_process_by_default(paths):
    out = _run()
    assert paths == [("in-process", "fast", 2097)]
    assert out.metrics["A"]["passed"] and out.metrics["B"]["passed"]


def test_naive_takes_the_seeds_path_whatever_the_workers(paths):
    _run(algorithm="naive", workers=3, executor="thread")
    assert paths == [("in-process", "naive", 2097)]


def test_one_worker_stays_in_process(paths):
    _run(workers=1, executor="thread")
    assert paths == [("in-process", "fast", 2097)]


def test_two_workers_pool_with_the_executor_asked_for(paths):
    _run(workers=2, executor="thread", delta=1000)
    _run(workers=3)
    assert paths == [("pooled", 2, "thread", None, 1000), ("pooled", 3, "process", None, 2097)]


def test_auto_workers_pool_with_the_count_auto_gives(paths, monkeypatch):
    monkeypatch.setattr(pooled, "gradcheck_workers", lambda requested, T, DM, R: requested or 4)
    _run(workers=0, executor="thread")
    _run(executor="thread")
    assert paths == [("pooled", 4, "thread", None, 2097)] * 2


def test_dask_goes_to_the_cluster_with_the_workers_as_given(paths):
    _run(workers=0, executor="dask")
    _run(workers=1, executor="dask")
    _run(workers=3, options={"scheduler": "tcp://127.0.0.1:1"})
    _run(options={"scheduler": "tcp://127.0.0.1:1"})
    assert paths == [("pooled", 0, "dask", None, 2097), ("pooled", 1, "dask", None, 2097),
                     ("pooled", 3, "dask", "tcp://127.0.0.1:1", 2097), ("pooled", 0, "dask", "tcp://127.0.0.1:1", 2097)]


def test_a_scheduler_with_another_executor_is_a_config_error(paths):
    with pytest.raises(ConfigError, match="applies to executor=dask, not executor=thread"):
        _run(workers=2, executor="thread", options={"scheduler": "tcp://127.0.0.1:1"})


def test_a_guard_that_trips_is_refused_naming_the_sizes():
    with pytest.raises(ResourceError) as exc:
        _run(T=3, DM=6, R=2, delta=1 << 40)
    msg = str(exc.value)
    assert msg.startswith("lora at T=3 DM=6 R=2 delta=1099511627776: int64 overflow guard tripped in ")
    assert msg.endswith("; use smaller sizes or delta")
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


def test_validate_checks_the_rank_and_the_memory():
    lora_gate.validate({**ODD})
    with pytest.raises(ConfigError, match=r"^R=6 must not exceed DM=5 "):
        lora_gate.validate({**ODD, "R": 6})


def _verdict():
    ana = np.array([5, -10, 0], np.int64)
    return gradcheck.judge("A (lora)", ana, np.array([10, -16, 8]), 1, 100)


def test_cell_lines_give_every_cells_integers():
    assert list(lora_gate._cell_lines(_verdict())) == [
        "   A (lora) cell 0 ana=5 num=5 rel=0",
        "   A (lora) cell 1 ana=-10 num=-8 rel=200",
        "   A (lora) cell 2 ana=0 num=4 rel=400",
    ]


def test_the_digest_hashes_the_loss_and_every_cells_integers():
    g = _verdict()
    other = gradcheck.judge("B (lora)", np.array([1, 2], np.int64), np.array([2, 4]), 1, 0)
    h = hashlib.sha256(b"1234")
    for v in (g, other):
        h.update(b"".join(int(a).to_bytes(8, "little", signed=True) for a in v.analytic.tolist()))
        h.update(b"".join(int(a).to_bytes(8, "little", signed=True) for a in v.numeric.tolist()))
    assert lora_gate._digest(1234, [g, other]) == h.hexdigest()
    assert lora_gate._digest(1235, [g, other]) != h.hexdigest()


def test_planted_gradients_leave_the_gradients_alone_without_a_fault():
    dA, dB = np.arange(6).reshape(3, 2), np.arange(6).reshape(2, 3)
    a, b = lora_gate.planted_gradients(None, None, dA, dB)
    assert a is dA and b is dB and a.tolist() == [[0, 1], [2, 3], [4, 5]]


def test_the_run_reports_the_peft_share():
    out = _run(T=3, DM=6, R=2)
    assert out.metrics["loss_q"] == 1329684529960
    assert (out.metrics["trained_params"], out.metrics["total_params"], out.metrics["peft_permil"]) == (24, 60, 400)


def test_a_refusal_in_the_gradcheck_names_its_computation_and_the_sizes(monkeypatch):
    def refuse(*args):
        raise q20.Q20Overflow("planted", 1.0)

    monkeypatch.setattr(gradcheck, "adapter_diffs", refuse)
    with pytest.raises(ResourceError, match=r"^lora at T=2 DM=5 R=2 delta=2097: int64 overflow guard tripped in "
                                            r"planted \(\|value\| could reach 1 >= 2\^62\); use smaller sizes or "
                                            r"delta$"):
        _run()


def test_gradcheck_verdicts_are_judged_against_the_tolerance():
    assert isinstance(_verdict(), Gradcheck)
    out = _run(tol_permil=0)
    assert out.metrics["A"]["cells_passed"] < out.metrics["A"]["cells"]
