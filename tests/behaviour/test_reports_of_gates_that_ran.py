"""The reports of the gates that ran are written however a later gate ends: here refused while running
(exit 2, one line), which used to lose both reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET


def test_a_later_gate_refused_while_running_keeps_the_earlier_reports(invoke, tmp_path):
    r = invoke("run", "parallel-grad", "lora", "--set", "lora.delta=1099511627776", "--json", "j.json",
               "--junit", "x.xml")
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1].startswith("nxgates: error: lora at T=3 DM=6 R=2 delta=1099511627776")
    doc = json.loads((tmp_path / "j.json").read_text())
    assert [g["name"] for g in doc["gates"]] == ["parallel-grad"] and doc["passed"] is False
    assert doc["gates"][0]["passed"] is True
    suite = ET.parse(tmp_path / "x.xml").getroot()
    assert "nxgates.parallel-grad" in {case.get("classname") for case in suite.iter("testcase")}
