"""The selftest's kill table and JSON document, made from its rows."""

import io
import json

from nxgates.gatekit import GateOutput
from nxgates.reporting.console import Renderer
from nxgates.reporting.selftest import KillTable, selftest_json_text
from nxgates.runner import GateReport
from nxgates.selftest import KillRow


def report(*checks):
    out = GateOutput()
    for name, passed in checks:
        out.check(name, passed)
    return GateReport("g", {"N": 3}, out, 0.5)


CLEAN = KillRow("g", None, report(("sum", True)))
CAUGHT = KillRow("g", "off-by-one", report(("sum", False)), ("sum",), "wide")
MISSED = KillRow("g", "silent", report(("sum", True)), ("sum",))


def table_text(rows):
    stream = io.StringIO()
    table = KillTable(Renderer(stream))
    table.header()
    for row in rows:
        table.row(row)
    return table.summary(rows), stream.getvalue().splitlines()


def test_a_green_kill_table():
    ok, lines = table_text([CLEAN, CAUGHT])
    assert ok
    assert lines == [
        "GATE                  FAULT               EXPECTED  RESULT    BY",
        "g                     (clean)             pass      PASS      all checks",
        "g[wide]               off-by-one          fail      caught    sum",
        "==== selftest: 1/1 clean gates passed, 1/1 faults caught -- GREEN",
    ]


def test_a_missed_fault_makes_it_red():
    ok, lines = table_text([CLEAN, MISSED])
    assert not ok
    assert lines[2] == "g                     silent              fail      MISSED    no check failed"
    assert lines[-1].endswith("0/1 faults caught -- RED")


def test_the_json_holds_the_kills_and_every_run():
    doc = json.loads(selftest_json_text([CLEAN, CAUGHT]))
    assert doc["passed"] is True
    assert doc["kills"][1] == {"gate": "g", "variant": "wide", "fault": "off-by-one", "ok": True, "caught": True,
                               "failed_checks": ["sum"], "expected": ["sum"]}
    assert [g["name"] for g in doc["gates"]] == ["g", "g"] and doc["gates"][0]["params"] == {"N": 3}
