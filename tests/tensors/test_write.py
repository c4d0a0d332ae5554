"""``nxgates export``: the arrays a gate makes, checked, and written atomically into an ``.npz`` with its
metadata, readable by numpy without pickle and by ``--inputs``."""

import os
import struct
import zipfile

import numpy as np
import pytest

from nxgates.errors import ConfigError
from nxgates.gatekit import InputArray, InputSpec
from nxgates.tensors import write
from nxgates.tensors.read import read_npz

PARAMS = {"N": 2, "M": 3}


def spec_making(**made):
    return InputSpec(arrays=(InputArray("a", "q20", ("N", "M")), InputArray("b", "float32", ("M",))),
                     make=lambda params: made if params is PARAMS else None)


def good():
    return {"a": np.arange(6, dtype=np.int64).reshape(2, 3), "b": np.array([0.5, -1.0, 2.0], np.float32)}


# --- export_arrays --------------------------------------------------------------------------------------


def test_the_arrays_are_the_gates_in_the_declared_order_little_endian_and_c_ordered():
    made = {"b": good()["b"], "a": np.asfortranarray(good()["a"])}
    got = write.export_arrays(spec_making(**made), PARAMS)
    assert list(got) == ["a", "b"]
    for k, v in good().items():
        assert got[k].dtype.str == v.dtype.newbyteorder("<").str and got[k].flags.c_contiguous
        np.testing.assert_array_equal(got[k], v)


def test_arrays_already_in_the_files_layout_are_not_copied():
    made = good()
    got = write.export_arrays(spec_making(**made), PARAMS)
    assert all(got[k] is made[k] or np.shares_memory(got[k], made[k]) for k in made)


def test_an_array_made_in_another_dtype_is_a_bug_refused():
    made = {**good(), "a": good()["a"].astype(np.float64)}
    with pytest.raises(TypeError) as exc:
        write.export_arrays(spec_making(**made), PARAMS)
    assert str(exc.value) == "input a made as float64 (2, 3), declared int64 (2, 3)"


def test_an_array_made_big_endian_is_a_bug_refused():
    made = {**good(), "b": good()["b"].astype(">f4")}
    with pytest.raises(TypeError) as exc:
        write.export_arrays(spec_making(**made), PARAMS)
    assert str(exc.value) == "input b made as >f4 (3,), declared float32 (3,)"


def test_an_array_made_in_another_shape_is_a_bug_refused():
    made = {**good(), "b": np.zeros(4, np.float32)}
    with pytest.raises(TypeError) as exc:
        write.export_arrays(spec_making(**made), PARAMS)
    assert str(exc.value) == "input b made as float32 (4,), declared float32 (3,)"


# --- write_npz ------------------------------------------------------------------------------------------


def test_the_archive_holds_the_arrays_and_the_metadata_as_sorted_json(tmp_path):
    path = str(tmp_path / "out.npz")
    write.write_npz(path, "g", {"N": 2, "M": 3}, good())
    with np.load(path, allow_pickle=False) as npz:
        assert npz.files == ["a", "b", "nxgates"]
        for k, v in good().items():
            np.testing.assert_array_equal(npz[k], v)
        meta = npz["nxgates"]
        assert meta.shape == () and meta.dtype.kind == "U"
        assert str(meta) == '{"format": 1, "gate": "g", "params": {"M": 3, "N": 2}}'
    spec = spec_making()
    arrays, meta = read_npz(path, spec)
    assert meta == {"format": 1, "gate": "g", "params": {"M": 3, "N": 2}}
    np.testing.assert_array_equal(arrays["a"], good()["a"])
    assert os.listdir(tmp_path) == ["out.npz"]


def test_members_are_stored_uncompressed_with_zip64_sizes(tmp_path):
    """zip64 sizes in every local header: a member is streamed, and may pass 4 GiB."""
    path = tmp_path / "out.npz"
    write.write_npz(str(path), "g", {}, good())
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == ["a.npy", "b.npy", "nxgates.npy"]
    for info in infos:
        assert info.compress_type == zipfile.ZIP_STORED
        head = raw[info.header_offset: info.header_offset + 30]
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        extra = raw[info.header_offset + 30 + name_len: info.header_offset + 30 + name_len + extra_len]
        assert extra[:2] == b"\x01\x00"  # the zip64 extra field


def test_a_bare_file_name_is_written_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write.write_npz("here.npz", "g", {}, good())
    assert sorted(os.listdir(tmp_path)) == ["here.npz"]


def test_the_file_is_replaced_from_a_hidden_temporary_beside_it(tmp_path, monkeypatch):
    moved = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (moved.append((src, dst)), real(src, dst)))
    (tmp_path / "sub").mkdir()
    path = str(tmp_path / "sub" / "out.npz")
    write.write_npz(path, "g", {}, good())
    [(src, dst)] = moved
    assert dst == path and os.path.dirname(src) == os.path.dirname(path)
    name = os.path.basename(src)
    assert name.startswith(".nxgates-") and name.endswith(".tmp")
    assert os.listdir(tmp_path / "sub") == ["out.npz"]


def test_a_directory_that_does_not_exist(tmp_path):
    path = str(tmp_path / "none" / "out.npz")
    with pytest.raises(ConfigError) as exc:
        write.write_npz(path, "g", {}, good())
    assert str(exc.value) == f"--out {path}: cannot write: No such file or directory"


def test_a_target_that_is_a_directory_leaves_no_temporary(tmp_path):
    (tmp_path / "d").mkdir()
    path = str(tmp_path / "d")
    with pytest.raises(ConfigError) as exc:
        write.write_npz(path, "g", {}, good())
    assert str(exc.value) == f"--out {path}: is a directory, not a regular file"
    assert os.listdir(tmp_path) == ["d"]


def test_an_error_without_strerror_is_shown_whole_and_a_failing_cleanup_is_ignored(tmp_path, monkeypatch):
    def fail(src, dst):
        raise OSError("disk went away")

    def cannot_unlink(path):
        raise OSError("read-only")

    monkeypatch.setattr(os, "replace", fail)
    monkeypatch.setattr(os, "unlink", cannot_unlink)
    path = str(tmp_path / "out.npz")
    with pytest.raises(ConfigError) as exc:
        write.write_npz(path, "g", {}, good())
    assert str(exc.value) == f"--out {path}: cannot write: disk went away"


def test_the_temporary_is_removed_when_the_write_fails(tmp_path, monkeypatch):
    removed = []
    real = os.unlink
    monkeypatch.setattr(os, "unlink", lambda p: (removed.append(p), real(p)))
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(OSError(5, "I/O error")))
    path = str(tmp_path / "out.npz")
    with pytest.raises(ConfigError) as exc:
        write.write_npz(path, "g", {}, good())
    assert str(exc.value) == f"--out {path}: cannot write: I/O error"
    assert len(removed) == 1 and os.path.basename(removed[0]).startswith(".nxgates-")
    assert os.listdir(tmp_path) == []


def test_an_object_array_is_never_pickled(tmp_path):
    path = str(tmp_path / "out.npz")
    with pytest.raises(ValueError, match="allow_pickle=False"):
        write.write_npz(path, "g", {}, {"a": np.array([{"x": 1}], dtype=object)})
    assert os.listdir(tmp_path) == []
