"""A planted fault is never a green run. At a size where the fault cannot change anything,
planting it is exit 2 with one line saying why; where it can, a check catches it (exit 1). Never exit 0."""

from __future__ import annotations

import pytest

from tests.behaviour.from_outside import nx

#: faults planted at sizes where they may change nothing: each must be refused (exit 2, saying why) or
#: caught (exit 1), never a green run
FAULTS_AT_SIZES_WHERE_THEY_MAY_NOT_SHOW = [
    ("dp-train", "completion-order", ["--set", "B=2"]),
    ("dp-train", "completion-order", ["--set", "B=3"]),
    ("dp-train", "stale-weights", ["--set", "workers=64"]),
    ("lora-train", "stale-grad", ["--set", "T=1", "--set", "DM=1", "--set", "R=1"]),
]


@pytest.mark.parametrize("gate, fault, sets", FAULTS_AT_SIZES_WHERE_THEY_MAY_NOT_SHOW,
                         ids=[f"{g}-{f}-{'-'.join(s[1::2])}" for g, f, s in FAULTS_AT_SIZES_WHERE_THEY_MAY_NOT_SHOW])
def test_a_planted_fault_is_caught_or_refused(tmp_path, gate, fault, sets):
    r = nx("run", gate, "--inject", fault, *sets, cwd=tmp_path)
    assert r.returncode in (1, 2), (r.returncode, r.stdout[-1500:], r.stderr)
    assert "Traceback" not in r.stderr
    if r.returncode == 2:
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and fault in r.stderr, r.stderr
    else:
        assert any(line.lstrip().startswith("FAIL") for line in r.stdout.splitlines()), r.stdout


def test_the_same_fault_is_caught_at_a_size_where_it_shows(tmp_path):
    r = nx("run", "dp-train", "--inject", "completion-order", "--set", "B=4", "-q", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr


def test_selftest_plants_each_fault_where_it_can_be_caught(tmp_path):
    r = nx("selftest", "dp-train", "lora-train", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
