"""Where crosscheck finds the gates' seed-log formats (nxgates/crosscheck/seedlogs.py): gathered on demand, the log
formats and the gates' names."""

import pytest

from nxgates import crosscheck as xc
from nxgates.crosscheck.seedlogs import declared
from nxgates.errors import ConfigError
from nxgates.gates.lora import seedlog as lora_seedlog
from nxgates.gates.parallel_grad import seedlog as pg_seedlog


def test_log_formats_are_each_gates_declared_lines():
    assert xc.LOG_FORMATS == {"lora": lora_seedlog.LINES, "parallel_grad": pg_seedlog.LINES}


def test_gate_of_module_names_each_gate():
    assert xc.GATE_OF_MODULE == {"lora": "lora", "parallel_grad": "parallel-grad"}


def test_another_name_is_no_attribute():
    with pytest.raises(AttributeError) as info:
        xc.gate_of_module  # noqa: B018
    assert str(info.value) == "module 'nxgates.crosscheck' has no attribute 'gate_of_module'"
    assert not hasattr(xc, "XXGATE_OF_MODULEXX")


def test_declared_names_a_module_without_a_seed_log():
    with pytest.raises(ConfigError) as info:
        declared("dp_train")
    assert str(info.value) == "gate module 'dp_train' declares no seed log format"
    assert declared("lora") is xc.seed_log("lora")
    assert xc.known() == {"lora": xc.seed_log("lora"), "parallel_grad": xc.seed_log("parallel_grad")}
