"""parallel-grad's validation, memory plan, gradient layout, T4's verdict, the selftest's variants, and how
``run`` sets up (and always tears down) the pool, the host files and the compared file."""

from types import SimpleNamespace

import pytest

from nxgates.core.chunks import chunk_examples
from nxgates.core.mlp import Dims
from nxgates.errors import ConfigError
from nxgates.gatekit import GateOutput
from nxgates.gates.parallel_grad import gate
from nxgates.gates.parallel_grad.faults import SingleWorker
from tests.helpers import ctx

PARAMS = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 2, "executor": "thread", "reduction": "tree"}


# ---- validate ----

@pytest.fixture
def planned(monkeypatch):
    """What validate asks of the worker cap and the memory budget."""
    seen = {}
    monkeypatch.setattr(gate, "check_workers", lambda kind, n: seen.setdefault("workers", (kind, n)))
    monkeypatch.setattr(gate, "require", lambda nbytes, what: seen.setdefault("require", (nbytes, what)))
    monkeypatch.setattr(gate, "auto_workers", lambda: 6)
    return seen


def test_one_worker_is_refused_with_why():
    with pytest.raises(ConfigError) as e:
        gate.validate({**PARAMS, "workers": 1})
    assert str(e.value) == "workers=1 cannot show parallelism (T2 needs >1 worker); use 0 (auto) or >= 2"


def test_validate_plans_the_given_workers(planned):
    gate.validate({**PARAMS, "D": 5, "H": 7, "O": 3, "B": 11, "workers": 2, "executor": "process"})
    dims = Dims(5, 7, 3)
    assert planned["workers"] == ("process", 2)
    assert planned["require"] == (gate.footprint_bytes(dims, 2, 11, False), "parallel-grad at D=5 H=7 O=3 B=11")


def test_validate_plans_auto_workers_and_the_auto_executor(planned):
    gate.validate({**PARAMS, "workers": 0, "executor": "auto"})
    assert planned["workers"] == ("thread", 6)  # NP = 192: below where processes pay
    assert planned["require"][0] == gate.footprint_bytes(Dims(8, 16, 4), 6, 8, False)
    big = {**PARAMS, "D": 128, "H": 128, "O": 4, "workers": 3, "executor": "auto"}
    planned.clear()
    gate.validate(big)
    assert planned["workers"] == ("process", 3)


def test_validate_plans_a_cluster_s_bigger_chunks(planned, monkeypatch):
    params = {**PARAMS, "B": 1 << 20, "executor": "dask"}
    gate.validate(params)
    remote = gate.footprint_bytes(Dims(8, 16, 4), 2, 1 << 20, True)
    assert planned["require"] == (remote, "parallel-grad at D=8 H=16 O=4 B=1048576")
    assert remote > gate.footprint_bytes(Dims(8, 16, 4), 2, 1 << 20, False)


def test_validate_refuses_more_process_workers_than_the_machine_runs():
    with pytest.raises(ConfigError, match="workers=1024 is more than the process executor runs"):
        gate.validate({**PARAMS, "workers": 1024, "executor": "process"})


# ---- footprint ----

def _footprint(dims, workers, B, remote):
    chunk = chunk_examples(dims.n_params, workers, B, remote)
    rows = 4 * chunk * dims.n_params + chunk * (dims.D + dims.O)
    arenas = (workers + 1) * (2 * dims.arena + dims.n_w1)
    return 4 * (rows + arenas + dims.n_params + dims.n_w1)


def test_footprint_at_the_seeds_sizes():
    dims = Dims(8, 16, 4)  # arena 49, NP 192, W1 128, one chunk of 8
    rows = 4 * 8 * 192 + 8 * 12
    arenas = 3 * (2 * 49 + 128)
    assert gate.footprint_bytes(dims, 2, 8) == 4 * (rows + arenas + 192 + 128) == 28_952


@pytest.mark.parametrize("dims, workers, B", [(Dims(5, 3, 2), 3, 7), (Dims(31, 9, 3), 4, 100_000),
                                             (Dims(64, 33, 10), 2, 13)])
def test_footprint_counts_one_chunk_and_an_arena_per_worker(dims, workers, B):
    assert gate.footprint_bytes(dims, workers, B) == _footprint(dims, workers, B, False)
    assert gate.footprint_bytes(dims, workers, B, True) == _footprint(dims, workers, B, True)


def test_footprint_is_local_unless_told():
    dims = Dims(4, 4, 2)
    assert gate.footprint_bytes(dims, 2, 1 << 20) == _footprint(dims, 2, 1 << 20, False)
    assert gate.footprint_bytes(dims, 2, 1 << 20) < gate.footprint_bytes(dims, 2, 1 << 20, True)


# ---- layout ----

def test_grad_tensors_are_w1_then_w2_row_major():
    w1, w2 = gate.grad_tensors(Dims(5, 3, 2))
    assert (w1.name, w1.start, w1.rows, w1.cols) == ("W1", 0, 3, 5)
    assert (w2.name, w2.start, w2.rows, w2.cols) == ("W2", 15, 2, 3)


# ---- T4 ----

class Report:
    def __init__(self, max_ulps=3, nonfinite=0, passes=False, sign=0):
        self.max_ulps, self.nonfinite, self._passes, self.sign = max_ulps, nonfinite, passes, sign
        self.asked = []

    def passes(self, ulps):
        self.asked.append(ulps)
        return self._passes

    def lines(self):
        return ["   W1: 2 cells", "   W2: 1 cell"]


def _t4(mismatches, ulps, report):
    out = GateOutput()
    gate.judge_t4(out, SimpleNamespace(report=report), mismatches, "g.npy", ulps, "0123456789abcdef" * 4)
    return out


def test_t4_passes_on_no_difference_naming_the_digest():
    out = _t4(0, 0, None)
    assert [(c.name, c.passed, c.detail) for c in out.checks] == [
        (gate.T4, True, "matches g.npy (sha256 0123456789abcdef), BIT-IDENTICAL")]
    assert len(out.items) == 1


def test_t4_within_the_ulps_passes_with_the_largest():
    report = Report(max_ulps=2, passes=True)
    out = _t4(5, 3, report)
    assert report.asked == [3]
    assert [(i.text, i.level) for i in out.items[:2]] == [("   W1: 2 cells", "detail"), ("   W2: 1 cell", "detail")]
    assert [(c.passed, c.detail) for c in out.checks] == [(True, "within 3 ULP (5 cells differ from g.npy, "
                                                                 "worst 2 ULP)")]


def test_t4_bit_for_bit_fails_without_naming_a_bound():
    out = _t4(4, 0, Report(max_ulps=1))
    assert [(c.passed, c.detail) for c in out.checks] == [(False, "4 cells differ from g.npy, largest 1 ULP")]


def test_t4_beyond_the_ulps_names_the_bound_and_nonfinite_cells():
    out = _t4(4, 2, Report(max_ulps=9))
    assert out.checks[0].detail == "4 cells differ from g.npy, largest 9 ULP (> 2)"
    out = _t4(4, 2, Report(max_ulps=9, nonfinite=3))
    assert out.checks[0].detail == "4 cells differ from g.npy, largest 9 ULP (> 2), 3 non-finite"
    out = _t4(1, 0, Report(max_ulps=9, nonfinite=1))
    assert out.checks[0].detail == "1 cells differ from g.npy, largest 9 ULP, 1 non-finite"
    out = _t4(1, 2, Report(max_ulps=1, nonfinite=1, passes=True))
    assert out.checks[0].detail == "within 2 ULP (1 cells differ from g.npy, worst 1 ULP)"


def test_t4_says_bit_identical_only_when_no_cell_differs():
    assert "BIT-IDENTICAL" in _t4(0, 2, None).checks[0].detail
    for mismatches, ulps, report in ((1, 2, Report(max_ulps=0, passes=True)), (3, 9, Report(max_ulps=9, passes=True)),
                                     (3, 0, Report(max_ulps=1))):
        c = _t4(mismatches, ulps, report).checks[0]
        assert "BIT-IDENTICAL" not in f"{c.name} {c.detail}" and f"{mismatches} cells differ" in c.detail


def test_t4_names_the_cells_of_opposite_sign_whether_it_passes_or_fails():
    """Sign differences are close only between tiny numbers; a pass or a FAIL says how many there were."""
    passing = _t4(2, 9, Report(max_ulps=4, passes=True, sign=2)).checks[0]
    assert passing.detail == "within 9 ULP (2 cells differ from g.npy, worst 4 ULP, 2 of opposite sign)"
    failing = _t4(5, 2, Report(max_ulps=2132141538, sign=5)).checks[0]
    assert failing.detail == "5 cells differ from g.npy, largest 2132141538 ULP (> 2), 5 of opposite sign"


# ---- the selftest's variants ----

def test_with_dask_the_selftest_adds_one_dask_variant_of_two_workers(monkeypatch):
    import contextlib
    import sys
    import types

    monkeypatch.setattr(gate, "dask_available", lambda: True)
    entered = []

    @contextlib.contextmanager
    def fake_cluster():
        entered.append(1)
        yield

    module = types.ModuleType("nxgates.core.pool.dask")
    module.session_cluster = fake_cluster
    monkeypatch.setitem(sys.modules, "nxgates.core.pool.dask", module)
    (variant,) = gate.selftest_variants()
    assert variant[:2] == ("dask", {"executor": "dask", "workers": 2})
    with variant[2]():
        assert entered == [1]


def test_without_dask_there_is_no_variant(monkeypatch):
    monkeypatch.setattr(gate, "dask_available", lambda: False)
    assert gate.selftest_variants() == ()


# ---- run's set-up and tear-down ----

class Closing:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def close(self):
        self.log.append(f"close {self.name}")

    def remove(self):
        self.log.append(f"remove {self.name}")


@pytest.fixture
def wiring(monkeypatch):
    log, seen = [], {}

    def choose(executor, scheduler, auto, n_params):
        seen["choose"] = (executor, scheduler, auto, n_params)
        return "chosen"

    def make_pool(executor, workers, fault_class, scheduler):
        seen["pool"] = (executor, workers, fault_class, scheduler)
        if seen.get("pool_fails"):
            raise RuntimeError("no pool")
        return Closing(log, "pool")

    def open_compare(path, B, n_params, tensors):
        seen["open"] = (path, B, n_params, [(t.name, t.start, t.rows, t.cols) for t in tensors])
        return None if path is None else Closing(log, "compare")

    def fake_run(*args):
        seen["_run"] = args
        return "output"

    monkeypatch.setattr(gate, "choose_executor", choose)
    monkeypatch.setattr(gate, "make_pool", make_pool)
    monkeypatch.setattr(gate.GradReader, "open", staticmethod(open_compare))
    monkeypatch.setattr(gate, "HostFiles", lambda: Closing(log, "host"))
    monkeypatch.setattr(gate, "_run", fake_run)
    return log, seen


def test_run_makes_the_pool_runs_and_closes_everything(wiring):
    log, seen = wiring
    c = ctx({**PARAMS, "D": 5, "H": 3, "O": 2, "B": 7, "workers": 3, "executor": "auto"},
            compare_grads="g.npy", scheduler="tcp://h:1")
    assert gate.run(c) == "output"
    assert seen["open"] == ("g.npy", 7, 21, [("W1", 0, 3, 5), ("W2", 15, 2, 3)])
    assert seen["choose"] == ("auto", "tcp://h:1", gate.AUTO_EXECUTOR, 21)
    assert seen["pool"] == ("chosen", 3, None, "tcp://h:1")
    ctx_, pool, host, dims, B, compare = seen["_run"]
    assert ctx_ is c and pool.name == "pool" and host.name == "host" and dims == Dims(5, 3, 2) and B == 7
    assert compare.name == "compare"
    assert log == ["close pool", "remove host", "close compare"]


def test_run_puts_a_pool_fault_in_front_of_the_pool(wiring):
    log, seen = wiring
    gate.run(ctx(PARAMS, fault="single-worker"))
    assert seen["pool"] == ("chosen", 2, SingleWorker, None)
    assert seen["open"][0] is None and seen["_run"][5] is None
    assert log == ["close pool", "remove host"]
    gate.run(ctx(PARAMS, fault="shared-arena"))
    assert seen["pool"][2] is None


def test_run_tears_down_when_the_pool_cannot_be_made(wiring):
    log, seen = wiring
    seen["pool_fails"] = True
    with pytest.raises(RuntimeError, match="no pool"):
        gate.run(ctx(PARAMS, compare_grads="g.npy"))
    assert log == ["remove host", "close compare"]


def test_ulp_without_a_compared_file_is_a_usage_error(wiring):
    log, seen = wiring
    with pytest.raises(ConfigError) as e:
        gate.run(ctx(PARAMS, ulp=2))
    assert str(e.value) == "--ulp sets how close --compare-grads must be; give --compare-grads FILE too"
    assert seen == {} and log == []
    gate.run(ctx(PARAMS, ulp=2, compare_grads="g.npy"))
    assert seen["open"][0] == "g.npy"
    gate.run(ctx(PARAMS, ulp=None))
    assert seen["open"][0] is None
