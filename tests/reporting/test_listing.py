"""list's table and show's description, made from registry entries."""

from nxgates.gatekit import Fault, GateDef, GateOutput, IntParam
from nxgates.registry import GateEntry
from nxgates.reporting.listing import gate_description, gate_list


def entry(name, faults=None):
    gate = GateDef(params={"N": IntParam("rows", min=1, max=9)}, checks=("sum",), run=lambda ctx: GateOutput(),
                   faults=faults or {})
    return GateEntry.of(name, gate, {"N": 3})


def test_the_list_aligns_its_columns_to_the_widest_cell():
    short, wide = entry("g"), entry("a-much-longer-name")
    wide.aliases = ("w",)
    lines = list(gate_list([short, wide]))
    assert lines[0].startswith("GATE                ALIASES  FROM      DESCRIPTION")
    assert lines[1] == "g                   -        built-in  g"
    assert lines[2] == "a-much-longer-name  w        built-in  a-much-longer-name"


def test_a_broken_gate_is_listed_with_why():
    broken = entry("plug")
    broken.broken = "cannot import"
    assert list(gate_list([broken]))[1].endswith("  BROKEN: cannot import")


def test_the_description_names_parameters_presets_checks_and_faults():
    lines = list(gate_description(entry("g", {"off-by-one": Fault("adds one", ("sum",))})))
    assert lines[0] == "g: g"
    assert lines[1] == "parameters (--set KEY=VALUE):"
    assert lines[2].startswith("  N            default 3        ")
    assert "  seed         (the defaults: the seed's sizes)" in lines
    assert lines[-3:] == ["  sum", "faults (--inject FAULT):",
                          "  off-by-one         adds one (caught by: sum)"]
    assert list(gate_description(entry("g")))[-1] == "  (none)"
