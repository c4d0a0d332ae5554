"""Reading gates.toml (nxgates/registry/loading.py) through the parse cache: the cache is written only where
Python would write bytecode (and always by ``cache_packaged``, as ``make compile`` runs it), and only the
packaged gates.toml is cached, never a ./gates.toml or a --config file."""

import sys

from nxgates import registry, tomlcache
from tests.helpers import PACKAGED_DATA as DATA
from tests.helpers import PACKAGED_PARSED as PARSED
from tests.helpers import PACKAGED_SOURCE as SOURCE
from tests.helpers import PACKAGED_TEXT as TEXT
from tests.helpers import registry_tables as tables


def test_the_registry_writes_the_cache_only_where_python_would_write_bytecode(cache, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # python -B, PYTHONDONTWRITEBYTECODE
    assert tables(registry.parse(TEXT, SOURCE, cache)) == PARSED
    assert not cache.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert tables(registry.parse(TEXT, SOURCE, cache)) == PARSED
    assert tomlcache.read(cache, TEXT) == DATA


def test_only_the_packaged_gates_toml_is_cached(tmp_path, monkeypatch, writes_bytecode):
    """A ./gates.toml or --config file may sit in a directory others write to: it is always parsed."""
    cache = tmp_path / "cache" / "gates.toml.test.marshal"
    monkeypatch.setattr(tomlcache, "cache_path", lambda source: cache)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gates.toml").write_text(TEXT, encoding="utf-8")
    registry.load(None)  # ./gates.toml
    registry.load(str(tmp_path / "gates.toml"))
    assert not cache.exists()
    (tmp_path / "gates.toml").unlink()
    assert tables(registry.load(None)) == PARSED  # the packaged one
    assert tomlcache.read(cache, TEXT) == DATA


def test_cache_packaged_writes_even_under_dont_write_bytecode(tmp_path, monkeypatch):
    """What `make compile` runs, where PYTHONDONTWRITEBYTECODE is set (as compileall writes bytecode)."""
    cache = tmp_path / "__pycache__" / "gates.toml.test.marshal"
    monkeypatch.setattr(tomlcache, "cache_path", lambda source: cache)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    registry.cache_packaged()
    assert tomlcache.read(cache, TEXT) == DATA
