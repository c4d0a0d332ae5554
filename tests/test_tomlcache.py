"""The packaged gates.toml's parse cache: used only for the very text it was made from; anything wrong with
it means parsing the text again, never an error and never another registry."""

import marshal
import os
import threading
import tomllib

import pytest

from nxgates import registry, tomlcache
from tests.helpers import PACKAGED_DATA as DATA
from tests.helpers import PACKAGED_PARSED as PARSED
from tests.helpers import PACKAGED_SOURCE as SOURCE
from tests.helpers import PACKAGED_TEXT as TEXT
from tests.helpers import registry_tables as tables


def test_a_written_cache_gives_back_the_parse_in_file_order(cache):
    assert tomlcache.write(cache, TEXT, DATA)
    cached = tomlcache.read(cache, TEXT)
    assert cached == DATA
    assert list(cached["gates"]) == list(DATA["gates"])  # `list` and `run all` go in file order
    assert list(cached["gates"]["lora"]["params"]) == list(DATA["gates"]["lora"]["params"])
    assert tables(registry.parse(TEXT, SOURCE, cache)) == PARSED


def test_the_cache_of_another_text_is_never_used(cache, writes_bytecode):
    earlier = TEXT.replace("T = 3", "T = 4", 1)  # the cache of an earlier gates.toml, then edited
    assert earlier != TEXT and tomlcache.write(cache, earlier, tomllib.loads(earlier))
    assert tomlcache.read(cache, TEXT) is None
    assert registry.parse(TEXT, SOURCE, cache).resolve("lora").defaults["T"] == 3
    assert tomlcache.read(cache, TEXT) == DATA  # and it is replaced by this text's parse


GOOD = marshal.dumps((tomlcache.FORMAT, TEXT, DATA))


@pytest.mark.parametrize("blob", [
    b"",
    b"not marshal data at all",
    b"\xff" * 64,
    GOOD[: len(GOOD) // 2],  # truncated
    marshal.dumps([tomlcache.FORMAT, TEXT, DATA]),  # not a tuple
    marshal.dumps(("another format 2", TEXT, DATA)),
    marshal.dumps((tomlcache.FORMAT, TEXT)),
    marshal.dumps((tomlcache.FORMAT, TEXT, [DATA])),  # the parse is not a table
    marshal.dumps((tomlcache.FORMAT, TEXT.encode(), DATA)),  # bytes are not the text
], ids=["empty", "text", "bad-type-code", "truncated", "list", "format", "short", "not-a-dict", "bytes"])
def test_a_corrupt_cache_is_ignored_and_the_text_parsed(cache, blob, writes_bytecode):
    cache.parent.mkdir()
    cache.write_bytes(blob)
    assert tomlcache.read(cache, TEXT) is None
    assert tables(registry.parse(TEXT, SOURCE, cache)) == PARSED
    assert tomlcache.read(cache, TEXT) == DATA  # rewritten whole


def test_a_cache_larger_than_the_limit_is_not_read(cache, monkeypatch):
    assert tomlcache.write(cache, TEXT, DATA)
    monkeypatch.setattr(tomlcache, "CACHE_LIMIT", len(GOOD) - 1)
    assert tomlcache.read(cache, TEXT) is None


def test_a_fifo_in_place_of_the_cache_does_not_block_the_start(cache):
    cache.parent.mkdir()
    os.mkfifo(cache)
    got = []
    reader = threading.Thread(target=lambda: got.append(tomlcache.read(cache, TEXT)), daemon=True)
    reader.start()
    reader.join(10)
    blocked = reader.is_alive()
    if blocked:  # in open(), waiting for a writer: give it one, so no thread is left behind
        os.close(os.open(cache, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert not blocked and got == [None]


def test_a_directory_in_place_of_the_cache_is_ignored_and_no_temporary_file_is_left(cache, writes_bytecode):
    cache.mkdir(parents=True)
    assert tomlcache.read(cache, TEXT) is None
    assert not tomlcache.write(cache, TEXT, DATA)
    assert tables(registry.parse(TEXT, SOURCE, cache)) == PARSED
    assert sorted(p.name for p in cache.parent.iterdir()) == [cache.name]


def test_an_unwritable_cache_location_is_no_error(tmp_path, writes_bytecode):
    blocker = tmp_path / "__pycache__"
    blocker.write_text("a file where the directory would be")  # fails even for root, unlike chmod
    cache = blocker / "gates.toml.test.marshal"
    assert not tomlcache.write(cache, TEXT, DATA)
    assert tables(registry.parse(TEXT, SOURCE, cache)) == PARSED


def test_a_toml_value_marshal_cannot_hold_is_simply_not_cached(cache):
    text = "when = 1979-05-27T07:32:00Z\n"
    assert not tomlcache.write(cache, text, tomllib.loads(text))
    assert not cache.parent.exists()
