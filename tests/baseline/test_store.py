"""The baseline file survives: atomic replacement, a format version, unknown entries kept, corrupt files
refused and never overwritten, symlinks and special files refused, concurrent updates both kept."""

import json
import os
import subprocess
import sys

import pytest

from nxgates.baseline import store
from nxgates.errors import ConfigError

FLAG = "--update-baseline"


def test_a_new_file_is_sorted_indented_json_with_a_format_version(tmp_path):
    path = tmp_path / "b.json"
    store.update(str(path), {"z[N=1]": {"b": 1, "a": 2}, "a[N=1]": {}}, FLAG)
    text = path.read_text()
    assert text == json.dumps({"format": 1, "entries": {"a[N=1]": {}, "z[N=1]": {"a": 2, "b": 1}}},
                              sort_keys=True, indent=2) + "\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left


def test_an_update_merges_and_keeps_what_it_does_not_know(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"format": 1, "later_field": [1], "entries": {"other[N=2]": {"x": 1},
                                                                           "mine[N=1]": {"old": True}}}))
    store.update(str(path), {"mine[N=1]": {"new": True}}, FLAG)
    doc = json.loads(path.read_text())
    assert doc == {"format": 1, "later_field": [1], "entries": {"other[N=2]": {"x": 1}, "mine[N=1]": {"new": True}}}


@pytest.mark.parametrize("text, message", [
    ("{not json", "corrupt JSON"),
    ('{"format": 2, "entries": {}}', "baseline format 2, this nxgates reads format 1"),
    ('{"format": 1}', "no entries table"),
    ("[]", "no entries table"),
])
def test_a_corrupt_or_foreign_file_is_refused_and_never_overwritten(tmp_path, text, message):
    path = tmp_path / "b.json"
    path.write_text(text)
    for call in (lambda: store.update(str(path), {"k": {}}, FLAG), lambda: store.check_updatable(str(path), FLAG),
                 lambda: store.load(str(path), "--baseline")):
        with pytest.raises(ConfigError, match=message):
            call()
    assert path.read_text() == text


def test_a_symlink_or_a_special_file_is_refused(tmp_path):
    real = tmp_path / "real.json"
    store.update(str(real), {"k": {}}, FLAG)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    before = real.read_text()
    with pytest.raises(ConfigError, match="is a symlink"):
        store.update(str(link), {"j": {}}, FLAG)
    with pytest.raises(ConfigError, match="is a symlink"):
        store.check_updatable(str(link), FLAG)
    assert real.read_text() == before and link.is_symlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        store.check_updatable(str(fifo), FLAG)
    with pytest.raises(ConfigError, match="not a regular file"):
        store.check_updatable(str(tmp_path), FLAG)
    with pytest.raises(ConfigError, match="does not exist"):
        store.check_updatable(str(tmp_path / "no-dir" / "b.json"), FLAG)


def test_the_mode_of_an_existing_file_is_kept(tmp_path):
    path = tmp_path / "b.json"
    store.update(str(path), {"k": {}}, FLAG)
    path.chmod(0o640)
    store.update(str(path), {"j": {}}, FLAG)
    assert path.stat().st_mode & 0o777 == 0o640


WRITER = """
import sys
from nxgates.baseline import store
for i in range(int(sys.argv[3])):
    store.update(sys.argv[1], {f"{sys.argv[2]}[i={i}]": {"i": i}}, "--update-baseline")
"""


def test_two_processes_updating_one_file_lose_no_entry(tmp_path):
    path = tmp_path / "b.json"
    n = 25
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, str(n)]) for who in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 2 * n and {f"a[i={i}]" for i in range(n)} <= entries.keys()


def test_without_the_lock_the_same_race_loses_entries(tmp_path, monkeypatch):
    """The check above can fail: with the lock taken away, interleaved read-merge-writes drop entries."""
    import contextlib

    path = tmp_path / "b.json"
    store.update(str(path), {"first": {}}, FLAG)
    monkeypatch.setattr(store, "_locked", lambda target, flag: contextlib.nullcontext())
    real_load = store.load

    def load_then_race(p, flag):  # another writer lands between this one's read and its write
        doc = real_load(p, flag)
        monkeypatch.setattr(store, "load", real_load)
        store.update(p, {"other": {}}, flag)
        return doc

    monkeypatch.setattr(store, "load", load_then_race)
    store.update(str(path), {"mine": {}}, FLAG)
    assert "other" not in json.loads(path.read_text())["entries"]


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_a_lock_path_that_is_not_a_regular_file_is_refused_before_any_gate_runs(invoke, tmp_path, kind):
    lock = tmp_path / "b.json.lock"
    if kind == "directory":
        lock.mkdir()
    elif kind == "symlink":
        lock.symlink_to(tmp_path / "elsewhere")
    else:
        os.mkfifo(lock)
    r = invoke("run", "lora", "--update-baseline", "b.json")
    assert r.exit_code == 2 and r.stdout == ""
    expected = {"directory": "a directory", "symlink": "a symlink", "fifo": "not a regular file"}[kind]
    assert f"its lock file b.json.lock is {expected}; remove it" in r.stderr
    assert not (tmp_path / "b.json").exists()
