"""Per-example gradient files: the header checked before numpy maps a file, the rows read a chunk at a time
in either byte order, and the writer's file produced whole or not at all."""

import os
import pickle

import numpy as np
import pytest

from nxgates.core import gradfiles
from nxgates.core.gradfiles import GradReader, GradWriter, _check_header, _raw_rows
from nxgates.core.ulp import Tensor
from nxgates.errors import ConfigError

F32 = np.float32


def _rows(B=3, NP=4):
    return np.arange(B * NP, dtype=F32).reshape(B, NP) / F32(4) - F32(1)


def _npy(path, arr, version=(1, 0)):
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, arr, version=version)
    return str(path)


def _message(fn, *args):
    with pytest.raises(ConfigError) as err:
        fn(*args)
    return str(err.value)


def _read_all(reader, B, NP, chunk=2):
    out = np.empty((B, NP), F32)
    for first in range(0, B, chunk):
        reader.read(first, out[first : first + chunk])
    return out


# ---- the header ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_a_header_of_the_expected_shape_and_length_passes(tmp_path, version):
    assert _check_header(_npy(tmp_path / "g.npy", _rows(), version), 3, 4) is None


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_a_header_of_another_shape_is_refused_before_numpy_maps_the_file(tmp_path, version):
    p = _npy(tmp_path / "g.npy", _rows(), version)
    assert _message(_check_header, p, 4, 3) == f"--compare-grads {p}: shape (3, 4) does not match (B, NP) = (4, 3)"


def test_a_long_shape_is_shown_cut_to_60_characters(tmp_path):
    p = _npy(tmp_path / "g.npy", np.zeros((1,) * 30, F32))
    shown = str((1,) * 30)[:60]
    assert len(shown) == 60
    assert _message(_check_header, p, 2, 2) == f"--compare-grads {p}: shape {shown} does not match (B, NP) = (2, 2)"


def test_a_file_longer_or_shorter_than_its_header_says_is_refused(tmp_path):
    p = _npy(tmp_path / "g.npy", _rows())
    size = os.path.getsize(p)
    with open(p, "ab") as fh:
        fh.write(b"\0" * 5)
    assert _message(_check_header, p, 3, 4) == (f"--compare-grads {p}: {size + 5} bytes, not the {size} of a (3, 4) "
                                                "float32 array (bytes after the data)")
    os.truncate(p, size - 1)
    assert _message(_check_header, p, 3, 4) == (f"--compare-grads {p}: {size - 1} bytes, not the {size} of a (3, 4) "
                                                "float32 array (the data is cut short)")


def test_the_length_is_counted_in_the_files_own_item_size(tmp_path):
    p = _npy(tmp_path / "g.npy", _rows().astype(np.float64))
    assert _check_header(p, 3, 4) is None  # the float64 is refused by the reader, not here


def test_what_is_not_an_npy_of_a_known_version_is_left_to_numpy(tmp_path):
    zipped = tmp_path / "a.npy"
    zipped.write_bytes(b"PK\x03\x04 an archive")
    assert _check_header(str(zipped), 3, 4) is None
    short = tmp_path / "b.npy"
    short.write_bytes(b"\x93NUMP")
    assert _check_header(str(short), 3, 4) is None
    v3 = _npy(tmp_path / "c.npy", np.zeros((5, 5), F32), version=(3, 0))
    assert _check_header(v3, 3, 4) is None


def test_an_unreadable_header_is_a_usage_error(tmp_path):
    p = tmp_path / "g.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr'")
    message = _message(_check_header, str(p), 3, 4)
    assert message.startswith(f"--compare-grads {p}: not a readable .npy file (")
    missing = str(tmp_path / "none.npy")
    assert _message(_check_header, missing, 3, 4) == f"--compare-grads {missing}: no such file"


def _wide_header_npy(path, fields):
    """A (3, 4) array of a structured dtype whose header is long (about 22 bytes a field)."""
    dtype = np.dtype([(f"f{i:05d}", "<u1") for i in range(fields)])
    return _npy(path, np.zeros((3, 4), dtype), version=(2, 0))


def test_headers_up_to_64_kib_are_read(tmp_path):
    p = _wide_header_npy(tmp_path / "g.npy", 1000)  # about 22 KiB: more than numpy's default limit of 10000
    assert _message(_check_header, p, 4, 3).startswith(f"--compare-grads {p}: shape (3, 4) does not match")


def test_a_header_beyond_64_kib_is_unreadable(tmp_path):
    p = _wide_header_npy(tmp_path / "g.npy", 4000)  # about 88 KiB
    assert _message(_check_header, p, 3, 4).startswith(f"--compare-grads {p}: not a readable .npy file (")


# ---- raw dumps -------------------------------------------------------------------------------------------


def test_a_raw_dump_is_mapped_read_only_as_little_endian_float32(tmp_path):
    p = tmp_path / "g.bin"
    p.write_bytes(_rows().astype("<f4").tobytes())
    arr = _raw_rows(str(p), 3, 4)
    assert arr.dtype == np.dtype("<f4") and arr.shape == (3, 4) and not arr.flags.writeable
    assert arr.tolist() == _rows().tolist()


def test_a_raw_dump_of_another_length_is_refused(tmp_path):
    p = tmp_path / "g.bin"
    p.write_bytes(b"\0" * 44)
    assert _message(_raw_rows, str(p), 3, 4) == (f"--compare-grads {p}: 44 bytes, expected 48 (raw float32 of shape "
                                                 "(B, NP) = (3, 4))")


def test_an_empty_raw_dump_cannot_be_mapped(tmp_path):
    p = tmp_path / "g.bin"
    p.write_bytes(b"")
    assert _message(_raw_rows, str(p), 0, 4) == f"--compare-grads {p}: cannot read: cannot mmap an empty file"


# ---- the reader ------------------------------------------------------------------------------------------


def test_no_path_no_reader():
    assert GradReader.open(None, 3, 4) is None


@pytest.mark.parametrize("order", ["<f4", ">f4"])
@pytest.mark.parametrize("fortran", [False, True])
def test_rows_are_read_in_chunks_in_either_byte_order_and_layout(tmp_path, order, fortran):
    rows = _rows(5, 4)
    data = np.asfortranarray(rows.astype(order)) if fortran else rows.astype(order)
    p = _npy(tmp_path / "g.npy", data)
    reader = GradReader.open(p, 5, 4)
    assert reader.path == p and reader.report is None
    assert reader.swapped is (order == ">f4")
    assert _read_all(reader, 5, 4).view(np.uint32).tolist() == rows.view(np.uint32).tolist()
    reader.close()
    assert reader.arr is None


def test_a_c_order_file_is_read_through_the_file_and_closed(tmp_path):
    reader = GradReader.open(_npy(tmp_path / "g.npy", _rows()), 3, 4)
    fh = reader.fh
    assert fh is not None and not fh.closed
    reader.close()
    assert fh.closed and reader.arr is None


def test_a_raw_dump_is_read_like_an_npy(tmp_path):
    p = tmp_path / "g.bin"
    p.write_bytes(_rows(5, 4).astype("<f4").tobytes())
    reader = GradReader.open(str(p), 5, 4)
    assert reader.path == str(p)
    assert _read_all(reader, 5, 4, chunk=3).tolist() == _rows(5, 4).tolist()
    reader.close()


def test_a_raw_dump_must_have_the_exact_length(tmp_path):
    p = tmp_path / "g.bin"
    p.write_bytes(b"\0" * 40)
    assert _message(GradReader.open, str(p), 3, 4) == (f"--compare-grads {p}: 40 bytes, expected 48 (raw float32 "
                                                       "of shape (B, NP) = (3, 4))")


def test_the_tensors_layout_gives_a_report(tmp_path):
    layout = (Tensor("W1", 0, 2, 1), Tensor("W2", 2, 1, 2))
    reader = GradReader.open(_npy(tmp_path / "g.npy", _rows()), 3, 4, layout)
    assert reader.report.tensors == layout
    p = tmp_path / "g.bin"
    p.write_bytes(_rows().tobytes())
    assert GradReader.open(str(p), 3, 4, layout).report.tensors == layout
    assert GradReader.open(str(p), 3, 4).report is None


def test_a_file_that_shrinks_while_it_is_read_is_a_usage_error(tmp_path):
    p = _npy(tmp_path / "g.npy", _rows())
    reader = GradReader.open(p, 3, 4)
    os.truncate(p, os.path.getsize(p) - 2)  # the map's last page is still backed
    out = np.empty((2, 4), F32)
    reader.read(0, out[:1])
    assert _message(reader.read, 1, out) == f"--compare-grads {p}: the file shrank while it was being read"
    reader.close()


def test_what_is_not_a_regular_file_is_refused(tmp_path):
    assert _message(GradReader.open, str(tmp_path), 3, 4) == f"--compare-grads {tmp_path}: is a directory"
    assert _message(GradReader.open, str(tmp_path / "x.npy"), 3, 4) == f"--compare-grads {tmp_path}/x.npy: no such file"


def test_another_dtype_is_refused(tmp_path):
    p = _npy(tmp_path / "g.npy", _rows().astype(np.float64))
    assert _message(GradReader.open, p, 3, 4) == f"--compare-grads {p}: expected float32, got float64"


def test_another_shape_in_a_header_numpy_reads_itself_is_refused(tmp_path):
    p = _npy(tmp_path / "g.npy", np.zeros((4, 3), F32), version=(3, 0))
    assert _message(GradReader.open, p, 3, 4) == f"--compare-grads {p}: shape (4, 3) does not match (B, NP) = (3, 4)"
    p = _npy(tmp_path / "h.npy", _rows(), version=(3, 0))
    assert GradReader.open(p, 3, 4).arr.shape == (3, 4)


def test_an_npz_archive_is_refused(tmp_path):
    p = tmp_path / "g.npy"
    with open(p, "wb") as fh:
        np.savez(fh, g=_rows())
    assert _message(GradReader.open, str(p), 3, 4) == (f"--compare-grads {p}: an .npz archive, not an .npy array "
                                                       "(use --save-grads' file)")


def test_a_pickle_is_never_loaded(tmp_path):
    p = tmp_path / "g.npy"
    p.write_bytes(pickle.dumps(_rows()))
    message = _message(GradReader.open, str(p), 3, 4)
    assert message.startswith(f"--compare-grads {p}: not a readable .npy file (")
    assert "pickle" in message


def test_a_file_that_cannot_be_opened_for_reading_is_a_usage_error(tmp_path, monkeypatch):
    p = _npy(tmp_path / "g.npy", _rows())
    real_open, calls = open, []

    def deny_the_reader(path, mode="r", *args, **kwargs):
        calls.append(path)
        if len(calls) > 1:  # the header check reads it; the reader's own open is refused
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(gradfiles, "open", deny_the_reader, raising=False)
    assert _message(GradReader.open, p, 3, 4) == f"--compare-grads {p}: cannot read: Permission denied"


# ---- the writer ------------------------------------------------------------------------------------------


def test_no_path_no_writer():
    assert GradWriter.create(None, 3, 4) is None
    assert GradWriter.create("", 3, 4) is None


def test_the_written_file_is_what_np_save_writes(tmp_path):
    p = str(tmp_path / "g.npy")
    writer = GradWriter.create(p, 3, 4)
    assert writer.path == p
    assert not os.path.exists(p)  # written beside it until finished
    rows = _rows()
    writer.write(rows[:2])
    writer.write(rows[2:])
    writer.finish()
    assert writer.out is None
    expected = tmp_path / "e.npy"
    np.save(expected, rows)
    with open(p, "rb") as fh:
        assert fh.read() == expected.read_bytes()
    writer.discard()  # after finish: nothing
    assert sorted(os.listdir(tmp_path)) == ["e.npy", "g.npy"]


def test_a_discarded_file_leaves_nothing_behind(tmp_path):
    p = str(tmp_path / "g.npy")
    writer = GradWriter.create(p, 3, 4)
    writer.write(_rows())
    writer.discard()
    assert writer.out is None
    writer.discard()
    assert os.listdir(tmp_path) == []


def test_the_save_grads_flag_names_refusals(tmp_path):
    assert _message(GradWriter.create, str(tmp_path), 3, 4) == (f"--save-grads {tmp_path}: is a directory, not a "
                                                                "regular file")


class _FullDisk:
    def __init__(self, exc):
        self.exc = exc

    def write(self, data):
        raise self.exc

    def close(self):
        pass


def test_a_failed_write_is_a_usage_error_naming_the_file(tmp_path):
    p = str(tmp_path / "g.npy")
    writer = GradWriter.create(p, 3, 4)
    real = writer.fh
    writer.fh = _FullDisk(OSError(28, "No space left on device"))
    assert _message(writer.write, _rows()) == f"--save-grads {p}: cannot write: No space left on device"
    writer.fh = _FullDisk(OSError("the device went away"))
    assert _message(writer.write, _rows()) == f"--save-grads {p}: cannot write: the device went away"
    writer.fh = real
    writer.discard()


@pytest.mark.parametrize(("exc", "shown"), [(OSError(28, "No space left on device"), "No space left on device"),
                                            (OSError("the device went away"), "the device went away")])
def test_a_failed_header_is_a_usage_error_and_leaves_nothing(tmp_path, monkeypatch, exc, shown):
    def fail(fh, header):
        raise exc

    monkeypatch.setattr(gradfiles.np.lib.format, "write_array_header_1_0", fail)
    p = str(tmp_path / "g.npy")
    assert _message(GradWriter.create, p, 3, 4) == f"--save-grads {p}: cannot write: {shown}"
    assert os.listdir(tmp_path) == []


def test_the_header_declares_float32_c_order_and_the_shape(tmp_path):
    p = str(tmp_path / "g.npy")
    writer = GradWriter.create(p, 2, 5)
    writer.write(np.ones((2, 5), F32))
    writer.finish()
    with open(p, "rb") as fh:
        assert np.lib.format.read_magic(fh) == (1, 0)
        assert np.lib.format.read_array_header_1_0(fh) == ((2, 5), False, np.dtype("<f4"))


def test_a_file_removed_before_numpy_opens_it_is_a_usage_error(tmp_path, monkeypatch):
    p = _npy(tmp_path / "g.npy", _rows())
    real_load = np.load

    def removed_first(path, *args, **kwargs):
        os.unlink(path)
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(gradfiles.np, "load", removed_first)
    assert _message(GradReader.open, p, 3, 4) == f"--compare-grads {p}: no such file"
