"""The executor decision: one function for every gate, each gate's meaning of ``auto`` given as its own
AutoExecutor."""

import pytest

from nxgates.core.pool import make_pool


def test_choose_executor_is_the_one_decision_for_every_gate():
    from nxgates.core.pool import AutoExecutor, choose_executor
    from nxgates.errors import ConfigError

    by_size, always = AutoExecutor(process_from=100), AutoExecutor()  # parallel-grad's kind, lora's kind
    assert [choose_executor("auto", None, by_size, work) for work in (99, 100)] == ["thread", "process"]
    assert choose_executor("auto", None, always, 0) == "process"
    assert choose_executor("auto", "tcp://h:1", by_size, 0) == choose_executor("auto", "tcp://h:1", always) == "dask"
    assert [choose_executor(kind, None) for kind in ("thread", "process", "dask")] == ["thread", "process", "dask"]
    assert choose_executor("dask", "tcp://h:1") == "dask"
    for kind in ("thread", "process"):
        with pytest.raises(ConfigError, match=f"^a scheduler address applies to executor=dask, not executor={kind}$"):
            choose_executor(kind, "tcp://h:1")
        with pytest.raises(ConfigError, match=f"^a scheduler address applies to executor=dask, not executor={kind}$"):
            make_pool(kind, 2, scheduler="tcp://h:1")
    with pytest.raises(ValueError, match="AutoExecutor"):
        choose_executor("auto", None)
