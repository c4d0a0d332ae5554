"""Reading a gate's input tensors: an ``.npz`` or a directory of raw dumps, every refusal one exact line, and
the digest that names them."""

import hashlib
import io
import json
import os
import zipfile

import numpy as np
import pytest

from nxgates.errors import ConfigError
from nxgates.gatekit import InputArray, InputSpec
from nxgates.tensors import read
from nxgates.tensors.read import arrays_digest

SPEC = InputSpec(
    arrays=(InputArray("a", "q20", ("N", "M")), InputArray("b", "float32", ("M", 3))),
    make=lambda params: {},
)


PARAMS = {"N": 2, "M": 4}


def npy(arr, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=True)
    return buf.getvalue()


def zip_of(path, members):
    """An archive of ``members``: name -> bytes (stored, as ``np.savez`` writes)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return str(path)


def good_arrays():
    return {"a": np.arange(8, dtype=np.int64).reshape(2, 4) - 3,
            "b": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)}


def npz_of(tmp_path, arrays, meta=None, name="in.npz"):
    members = [(f"{k}.npy", npy(v)) for k, v in arrays.items()]
    if meta is not None:
        members.append(("nxgates.npy", npy(np.array(meta))))
    return zip_of(tmp_path / name, members)


def refusal(fn, *args, **kwargs):
    with pytest.raises(ConfigError) as exc:
        fn(*args, **kwargs)
    return str(exc.value)


# --- .npz: what is read ---------------------------------------------------------------------------------


def test_an_npz_gives_the_arrays_in_the_specs_order_and_empty_metadata_without_a_member(tmp_path):
    arrays = good_arrays()
    path = npz_of(tmp_path, {"b": arrays["b"], "a": arrays["a"]})
    got, meta = read.read_npz(path, SPEC)
    assert list(got) == ["a", "b"]
    assert meta == {}
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].flags.c_contiguous
        np.testing.assert_array_equal(got[k], v)


def test_the_metadata_member_is_returned_as_a_dict(tmp_path):
    meta = {"format": 1, "gate": "g", "params": {"N": 2}}
    _, got = read.read_npz(npz_of(tmp_path, good_arrays(), json.dumps(meta)), SPEC)
    assert got == meta


def test_big_endian_and_fortran_arrays_are_read_into_native_c_order_with_the_same_values(tmp_path):
    arrays = good_arrays()
    odd = {"a": np.asfortranarray(arrays["a"].astype(">i8")), "b": np.asfortranarray(arrays["b"].astype(">f4"))}
    got, _ = read.read_npz(npz_of(tmp_path, odd), SPEC)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].dtype.isnative
        assert got[k].flags.c_contiguous and got[k].shape == v.shape
        np.testing.assert_array_equal(got[k], v)


def test_a_version_2_header_is_read(tmp_path):
    arrays = good_arrays()
    path = zip_of(tmp_path / "v2.npz", [(f"{k}.npy", npy(v, (2, 0))) for k, v in arrays.items()])
    got, _ = read.read_npz(path, SPEC)
    np.testing.assert_array_equal(got["a"], arrays["a"])


def test_the_memory_asked_for_is_twice_every_members_data(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(read, "require", lambda n, what: asked.append((n, what)))
    meta = json.dumps({"format": 1})
    path = npz_of(tmp_path, good_arrays(), meta)
    read.read_npz(path, SPEC)
    meta_bytes = np.array(meta).nbytes
    assert asked == [(2 * (8 * 8 + 12 * 4 + meta_bytes), f"--inputs {path}: its arrays")]


# --- .npz: refusals -------------------------------------------------------------------------------------


def test_a_missing_file_is_named_with_the_flag(tmp_path):
    path = str(tmp_path / "none.npz")
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: no such file"
    assert refusal(read.read_npz, path, SPEC, "--compare-grads") == f"--compare-grads {path}: no such file"


def test_a_file_that_is_not_a_zip(tmp_path):
    path = tmp_path / "x.npz"
    path.write_bytes(b"not a zip at all")
    assert refusal(read.read_npz, str(path), SPEC) == \
        f"--inputs {path}: not a readable .npz archive (File is not a zip file)"


def test_a_member_that_is_not_npy(tmp_path):
    path = zip_of(tmp_path / "x.npz", [("a.npy", npy(good_arrays()["a"])), ("notes.txt", b"hi")])
    assert refusal(read.read_npz, path, SPEC, "--f") == \
        f"--f {path}: unexpected member 'notes.txt' (an .npz holds one NAME.npy per array)"


def test_a_member_given_twice(tmp_path):
    a = npy(good_arrays()["a"])
    with pytest.warns(UserWarning):
        path = zip_of(tmp_path / "x.npz", [("a.npy", a), ("a.npy", a)])
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: unexpected member 'a.npy' (an .npz holds one NAME.npy per array)"


def test_a_missing_array_is_the_first_missing_in_the_gates_order(tmp_path):
    path = zip_of(tmp_path / "x.npz", [])
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: missing array a (member a.npy); the gate's arrays are a, b"
    path = npz_of(tmp_path, {"a": good_arrays()["a"]}, name="y.npz")
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: missing array b (member b.npy); the gate's arrays are a, b"


def test_an_unexpected_array_is_the_first_by_name(tmp_path):
    arrays = {**good_arrays(), "z": np.zeros(1), "c": np.zeros(1)}
    path = npz_of(tmp_path, arrays)
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: unexpected array c (member c.npy); the gate's arrays are a, b"


def test_a_wrong_dtype_names_the_array_and_the_declared_type(tmp_path):
    arrays = good_arrays()
    path = npz_of(tmp_path, {**arrays, "a": arrays["a"].astype(np.float64)})
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: array a: dtype float64, expected Q20 int64"
    path = npz_of(tmp_path, {**arrays, "b": arrays["b"].astype(np.int32)}, name="y.npz")
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: array b: dtype int32, expected float32"


def test_a_structured_dtype_is_refused(tmp_path):
    arrays = good_arrays()
    rec = np.zeros((2, 4), dtype=[("f", "<i8")])
    path = npz_of(tmp_path, {**arrays, "a": rec})
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: array a: dtype [('f', '<i8')], expected Q20 int64"


def test_a_wrong_rank_names_the_axes(tmp_path):
    arrays = good_arrays()
    path = npz_of(tmp_path, {**arrays, "b": arrays["b"].reshape(-1)})
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: array b: rank 1, expected 2 (M x 3)"
    path = npz_of(tmp_path, {**arrays, "a": arrays["a"].reshape(2, 2, 2)}, name="y.npz")
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: array a: rank 3, expected 2 (N x M)"


def test_an_unsupported_npy_version(tmp_path):
    arrays = good_arrays()
    path = zip_of(tmp_path / "x.npz", [("a.npy", npy(arrays["a"], (3, 0))), ("b.npy", npy(arrays["b"]))])
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: array a: .npy format version (3, 0) is not supported (1.0 or 2.0)"


def test_a_member_that_is_not_an_npy_one(tmp_path):
    path = zip_of(tmp_path / "x.npz", [("a.npy", b"garbage here"), ("b.npy", npy(good_arrays()["b"]))])
    msg = refusal(read.read_npz, path, SPEC)
    assert msg.startswith(f"--inputs {path}: array a: corrupt member, or not an .npy one (")


def test_an_object_array_is_refused_from_its_header(tmp_path):
    obj = np.array([[None] * 4] * 2, dtype=object)
    path = npz_of(tmp_path, {**good_arrays(), "a": obj})
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: array a: an object array (refused: nothing is unpickled)"


def test_a_member_shorter_than_its_header_declares(tmp_path):
    arrays = good_arrays()
    data = npy(arrays["a"])
    path = zip_of(tmp_path / "x.npz", [("a.npy", data[:-8]), ("b.npy", npy(arrays["b"]))])
    assert refusal(read.read_npz, path, SPEC) == (
        f"--inputs {path}: array a: truncated or corrupt: the header declares int64 of shape (2, 4) (64 bytes), "
        f"the member holds 56")


def test_a_member_longer_than_its_header_declares(tmp_path):
    arrays = good_arrays()
    path = zip_of(tmp_path / "x.npz", [("a.npy", npy(arrays["a"])), ("b.npy", npy(arrays["b"]) + b"\0" * 4)])
    assert refusal(read.read_npz, path, SPEC) == (
        f"--inputs {path}: array b: truncated or corrupt: the header declares float32 of shape (4, 3) (48 bytes), "
        f"the member holds 52")


def test_a_corrupted_member_fails_its_crc(tmp_path):
    arrays = {"a": np.arange(2000, dtype=np.int64).reshape(2, 1000), "b": np.zeros((1000, 3), np.float32)}
    path = zip_of(tmp_path / "x.npz", [("a.npy", npy(arrays["a"])), ("b.npy", npy(arrays["b"]))])
    raw = bytearray((tmp_path / "x.npz").read_bytes())
    tail = npy(arrays["a"])[-8:]
    at = raw.find(tail)
    raw[at] ^= 0xFF
    (tmp_path / "x.npz").write_bytes(bytes(raw))
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: array a: corrupt member (Bad CRC-32 for file 'a.npy')"


@pytest.mark.parametrize("meta", [np.array(7), np.array(["{}", "{}"]), np.array(b'{"format": 1}')])
def test_a_metadata_member_of_the_wrong_kind_or_shape_is_refused_from_its_header(tmp_path, meta):
    arrays = good_arrays()
    members = [("nxgates.npy", npy(meta)), ("a.npy", npy(arrays["a"].astype(np.float64))), ("b.npy", npy(arrays["b"]))]
    path = zip_of(tmp_path / "x.npz", members)
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: member nxgates.npy is not nxgates' metadata"


def test_metadata_of_exactly_the_limit_is_read_and_one_character_more_is_refused(tmp_path):
    text = '{"format": 1}'
    chars = read.META_LIMIT // 4  # unicode: four bytes a character
    at_limit = npz_of(tmp_path, good_arrays(), text.ljust(chars))
    assert read.read_npz(at_limit, SPEC)[1] == {"format": 1}
    arrays = good_arrays()
    over = zip_of(tmp_path / "over.npz", [("nxgates.npy", npy(np.array(text.ljust(chars + 1)))),
                                         ("a.npy", npy(arrays["a"].astype(np.float64))), ("b.npy", npy(arrays["b"]))])
    assert refusal(read.read_npz, over, SPEC) == f"--inputs {over}: member nxgates.npy is not nxgates' metadata"


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"gate": "g"}', '{"format": "1"}'])
def test_metadata_that_is_not_a_dict_with_an_integer_format(tmp_path, text):
    path = npz_of(tmp_path, good_arrays(), text)
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: member nxgates.npy is not nxgates' metadata"


def test_metadata_of_a_newer_format_is_refused_and_older_ones_read(tmp_path):
    path = npz_of(tmp_path, good_arrays(), '{"format": 2}')
    assert refusal(read.read_npz, path, SPEC) == \
        f"--inputs {path}: format 2 is newer than this nxgates reads (1)"
    assert read.read_npz(npz_of(tmp_path, good_arrays(), '{"format": 0}', "old.npz"), SPEC)[1] == {"format": 0}


def test_an_empty_array_is_read(tmp_path):
    arrays = {"a": np.zeros((0, 4), np.int64), "b": np.zeros((4, 3), np.float32)}
    got, _ = read.read_npz(npz_of(tmp_path, arrays), SPEC)
    assert got["a"].shape == (0, 4) and got["a"].dtype == np.int64


# --- raw dumps ------------------------------------------------------------------------------------------


def raw_dir(tmp_path, arrays):
    d = tmp_path / "dumps"
    d.mkdir(exist_ok=True)
    for k, v in arrays.items():
        v.astype(v.dtype.newbyteorder("<")).tofile(d / f"{k}.bin")
    return str(d)


def test_raw_dumps_are_read_in_the_shapes_of_the_parameters(tmp_path):
    arrays = good_arrays()
    d = raw_dir(tmp_path, arrays)
    (tmp_path / "dumps" / "notes.txt").write_text("ignored")
    got = read.read_raw_dir(d, SPEC, PARAMS)
    assert list(got) == ["a", "b"]
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].dtype.isnative and got[k].flags.c_contiguous
        np.testing.assert_array_equal(got[k], v)


def test_a_directory_that_cannot_be_listed(tmp_path):
    path = str(tmp_path / "nowhere")
    assert refusal(read.read_raw_dir, path, SPEC, PARAMS) == \
        f"--inputs {path}: cannot list the directory: No such file or directory"


def test_a_directory_error_without_strerror_is_shown_whole(tmp_path, monkeypatch):
    def fail(path):
        raise OSError("odd failure")

    monkeypatch.setattr(read.os, "listdir", fail)
    assert refusal(read.read_raw_dir, "d", SPEC, PARAMS, "--x") == "--x d: cannot list the directory: odd failure"


def test_a_missing_dump_and_an_unexpected_one(tmp_path):
    arrays = good_arrays()
    d = raw_dir(tmp_path, {"b": arrays["b"]})
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS) == \
        f"--inputs {d}: missing array a (a.bin); the gate's arrays are a, b"
    raw_dir(tmp_path, {"a": arrays["a"], "y": arrays["a"], "x": arrays["a"]})
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS, "--g") == \
        f"--g {d}: unexpected array x (x.bin); the gate's arrays are a, b"


def test_a_dump_that_is_a_directory(tmp_path):
    d = raw_dir(tmp_path, {"b": good_arrays()["b"]})
    os.mkdir(os.path.join(d, "a.bin"))
    file = os.path.join(d, "a.bin")
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS) == f"--inputs {d}: array a: {file}: is a directory"


def test_a_dump_of_the_wrong_length_gives_the_expected_size_and_shape(tmp_path):
    arrays = good_arrays()
    d = raw_dir(tmp_path, {"a": arrays["a"][:, :3], "b": arrays["b"]})
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS) == \
        f"--inputs {d}: array a: a.bin has 48 bytes, expected 64 (int64 of shape (N=2, M=4))"
    d = raw_dir(tmp_path, {"a": arrays["a"], "b": arrays["b"][:3]})
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS) == \
        f"--inputs {d}: array b: b.bin has 36 bytes, expected 48 (float32 of shape (M=4, 3))"


def test_the_memory_asked_for_raw_dumps_is_twice_their_size(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(read, "require", lambda n, what: asked.append((n, what)))
    d = raw_dir(tmp_path, good_arrays())
    read.read_raw_dir(d, SPEC, PARAMS)
    assert asked == [(2 * (64 + 48), f"--inputs {d}: its arrays")]


def test_a_dump_that_cannot_be_read(tmp_path, monkeypatch):
    d = raw_dir(tmp_path, good_arrays())

    def fail(file, dtype):
        raise OSError("device gone")

    monkeypatch.setattr(read.np, "fromfile", fail)
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS) == \
        f"--inputs {d}: array a: cannot read a.bin: device gone"


def test_a_dump_that_shrinks_while_it_is_read(tmp_path, monkeypatch):
    d = raw_dir(tmp_path, good_arrays())
    real = np.fromfile
    monkeypatch.setattr(read.np, "fromfile", lambda file, dtype: real(file, dtype)[:-1])
    assert refusal(read.read_raw_dir, d, SPEC, PARAMS) == f"--inputs {d}: array a: a.bin changed while it was read"


# --- sizes and values -----------------------------------------------------------------------------------


def test_sizes_come_from_the_first_array_that_gives_them():
    arrays = good_arrays()
    assert read.sizes_of("w", SPEC, arrays) == {"N": (2, "a"), "M": (4, "a")}
    spec = InputSpec(arrays=(InputArray("p", "q20", (2, "K")), InputArray("q", "q20", ("K", "K"))),
                     make=lambda params: {})
    assert read.sizes_of("w", spec, {"p": np.zeros((2, 5)), "q": np.zeros((5, 5))}) == {"K": (5, "p")}


def test_an_empty_axis_is_refused():
    arrays = {**good_arrays(), "b": np.zeros((4, 0), np.float32)}
    assert refusal(read.sizes_of, "w", SPEC, arrays) == "w: array b: empty (shape (4, 0))"


def test_a_fixed_axis_of_another_length_is_refused():
    arrays = {**good_arrays(), "b": np.zeros((4, 2), np.float32)}
    assert refusal(read.sizes_of, "w", SPEC, arrays) == "w: array b: axis 1 has length 2, expected 3"


def test_arrays_that_disagree_on_a_size_name_both():
    arrays = {**good_arrays(), "b": np.zeros((5, 3), np.float32)}
    assert refusal(read.sizes_of, "w", SPEC, arrays) == "w: array b: shape (5, 3) gives M=5, but array a gives M=4"


def test_finite_inputs_pass_and_q20_arrays_are_not_looked_at():
    assert read.check_finite("w", SPEC, good_arrays()) is None  # no refusal
    not_finite = {"f": np.array([np.nan, np.inf])}
    spec = InputSpec(arrays=(InputArray("f", "q20", ("N",)),), make=lambda params: {})
    assert read.check_finite("w", spec, not_finite) is None  # a q20 array is not looked at
    as_float = InputSpec(arrays=(InputArray("f", "float32", ("N",)),), make=lambda params: {})
    assert refusal(read.check_finite, "w", as_float, not_finite).startswith("w: array f: 2 value(s)")  # a float one is


def test_nan_or_inf_is_refused_naming_the_first_cell_and_the_count():
    b = np.zeros((4, 3), np.float32)
    b[1, 2], b[3, 0] = np.inf, np.nan
    arrays = {**good_arrays(), "b": b}
    assert refusal(read.check_finite, "w", SPEC, arrays) == \
        "w: array b: 2 value(s) are NaN or Inf (first at (1, 2): inf)"
    b[0, 1] = -np.inf
    assert refusal(read.check_finite, "w", SPEC, arrays) == \
        "w: array b: 3 value(s) are NaN or Inf (first at (0, 1): -inf)"


# --- the digest -----------------------------------------------------------------------------------------


def reference_digest(arrays):
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.array(arrays[name], order="C")
        le = a.astype(a.dtype.newbyteorder("<"))
        h.update(f"{name}:{le.dtype.str}:{a.shape};".encode())
        h.update(le.tobytes())
    return h.hexdigest()


def test_the_digest_covers_names_dtypes_shapes_and_little_endian_bytes_in_name_order():
    arrays = {"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.array([[1, -2]], np.int64)}
    digest = read.arrays_digest(arrays)
    assert digest == reference_digest(arrays)
    h = hashlib.sha256()
    h.update(b"a:<i8:(1, 2);" + np.array([1, -2], "<i8").tobytes())
    h.update(b"b:<f4:(2, 3);" + np.arange(6, dtype="<f4").tobytes())
    assert digest == h.hexdigest()


def test_the_digest_is_the_same_whatever_the_byte_or_memory_order():
    arrays = {"a": np.arange(12, dtype=np.int64).reshape(3, 4), "b": np.linspace(0, 1, 6, dtype=np.float32)}
    odd = {"a": np.asfortranarray(arrays["a"].astype(">i8")), "b": arrays["b"].astype(">f4")}
    transposed = {"a": np.ascontiguousarray(arrays["a"].T).T, "b": arrays["b"]}
    assert read.arrays_digest(odd) == read.arrays_digest(arrays) == read.arrays_digest(transposed)
    assert read.arrays_digest({**arrays, "b": arrays["b"].reshape(2, 3)}) != read.arrays_digest(arrays)


def test_the_digest_does_not_change_the_arrays():
    a = np.arange(4, dtype=">i8")
    read.arrays_digest({"a": a})
    assert a.dtype.str == ">i8"


def test_metadata_of_an_empty_unicode_type_is_refused_not_a_traceback(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<U0", "fortran_order": False, "shape": ()})
    members = [(f"{k}.npy", npy(v)) for k, v in good_arrays().items()]
    path = zip_of(tmp_path / "x.npz", [*members, ("nxgates.npy", header.getvalue())])
    assert refusal(read.read_npz, path, SPEC) == f"--inputs {path}: array nxgates: truncated: 0 of 4 bytes"


def test_the_digest_names_every_array_by_name_dtype_shape_and_bytes():
    a = {"x": np.arange(6, dtype=np.int64).reshape(2, 3), "W": np.ones((3, 3), np.int64)}
    same = {"W": np.ones((3, 3), np.int64), "x": np.arange(6, dtype=np.int64).reshape(2, 3)}
    assert arrays_digest(a) == arrays_digest(same)  # order of the mapping does not matter
    assert arrays_digest(a) != arrays_digest({**a, "x": a["x"].reshape(3, 2)})  # the shape does
    assert arrays_digest(a) != arrays_digest({**a, "x": a["x"].astype(np.int32)})  # the dtype does
    assert arrays_digest(a) != arrays_digest({"y": a["x"], "W": a["W"]})  # the names do
    moved = a["x"].copy()
    moved[1, 2] += 1
    assert arrays_digest(a) != arrays_digest({**a, "x": moved})
    big = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in a.items()}
    assert arrays_digest(a) == arrays_digest(big)  # the values, not their byte order in the file
