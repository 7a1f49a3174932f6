"""read_filterbank against `your` (and sigpyproc on Python >= 3.12) on every real filterbank,
the memory-mapped and gulped paths against each other, write_filterbank round trips, and the
readers' errors."""
import sys

import numpy as np
import pytest

import warpbeam as wb
from conftest import assert_no_files, data_dir

FILES = ["burst_28.fil", "small.fil", "parkes_1bit.fil", "parkes_2bit.fil", "parkes_4bit.fil",
         "parkes_8bit_1.fil", "tutorial_2bit.fil"]


def test_every_real_file_is_covered():
    folder = data_dir() / "filterbank"
    if not folder.exists():
        pytest.skip(f"no data folder {folder}")
    assert sorted(p.name for p in folder.glob("*.fil")) == sorted(FILES)
    assert sorted(BYTE_FILES + SUBBYTE_FILES) == sorted(FILES)


# `your` 0.6.7 reads 8-, 16- and 32-bit data only (get_data raises "nbits=N not supported" for
# 1, 2 and 4 bits): those files are checked against a NumPy unpacking of the raw bytes below.
BYTE_FILES = ["burst_28.fil", "small.fil", "parkes_8bit_1.fil"]
SUBBYTE_FILES = ["parkes_1bit.fil", "parkes_2bit.fil", "parkes_4bit.fil", "tutorial_2bit.fil"]


@pytest.mark.parametrize("name", BYTE_FILES)
def test_read_filterbank_equals_your(data, name):
    your = pytest.importorskip("your")
    path = data(f"filterbank/{name}")
    h, d = wb.read_filterbank(path)
    y = your.Your(str(path))
    assert h["nchans"] == y.your_header.nchans
    assert h["nsamples"] == y.your_header.nspectra
    assert h["tsamp"] == pytest.approx(y.your_header.tsamp, rel=1e-12)
    assert h["fch1"] == pytest.approx(y.your_header.fch1, rel=1e-12)
    assert h["foff"] == pytest.approx(y.your_header.foff, rel=1e-12)
    ref = y.get_data(nstart=0, nsamp=h["nsamples"])
    assert d.shape == ref.shape
    assert np.array_equal(np.asarray(d, dtype=np.float64), ref.astype(np.float64))


@pytest.mark.parametrize("name", SUBBYTE_FILES)
def test_subbyte_files_equal_numpy_unpacking(data, name):
    path = data(f"filterbank/{name}")
    h, d = wb.read_filterbank(path)
    nb, nch = h["nbits"], h["nchans"]
    raw = np.fromfile(path, dtype=np.uint8, offset=h["header_bytes"])
    per_byte = 8 // nb
    # SIGPROC: the first sample of a byte in its lowest bits
    vals = (raw[:, None] >> (nb * np.arange(per_byte))) & ((1 << nb) - 1)
    want = vals.reshape(-1)[: h["nsamples"] * nch].reshape(h["nsamples"], nch)
    assert d.dtype == np.float32
    assert np.array_equal(d, want.astype(np.float32))
    # your agrees with the header even where it cannot read the samples
    your = pytest.importorskip("your")
    y = your.Your(str(path))
    assert (y.your_header.nchans, y.your_header.nspectra) == (nch, h["nsamples"])


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sigpyproc's release needs Python 3.12")
@pytest.mark.parametrize("name", FILES)
def test_read_filterbank_equals_sigpyproc(data, name):
    readers = pytest.importorskip("sigpyproc.readers")
    path = data(f"filterbank/{name}")
    h, d = wb.read_filterbank(path)
    fil = readers.FilReader(str(path))
    block = fil.read_block(0, h["nsamples"]).data  # FilterbankBlock: [chan][time]
    assert np.array_equal(np.asarray(d, dtype=np.float64), np.asarray(block, np.float64).T)


@pytest.mark.parametrize("name", ["burst_28.fil", "parkes_8bit_1.fil", "parkes_4bit.fil"])
def test_mmap_gulps_and_ranges_agree(data, name):
    path = data(f"filterbank/{name}")
    h, whole = wb.read_filterbank(path)
    f = wb.open_filterbank(path)
    gulps = np.concatenate(list(f.gulps(1000)))
    assert np.array_equal(gulps, np.asarray(whole, dtype=np.float32))
    h2, part = wb.read_filterbank(path, start=100, nsamples=50, mmap=False)
    assert part.dtype == np.float32
    assert np.array_equal(part, np.asarray(whole[100:150], dtype=np.float32))


def test_write_filterbank_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    header = {"nchans": 16, "nbits": 8, "fch1": 1500.0, "foff": -1.0, "tsamp": 64e-6,
              "tstart": 60000.5, "source_name": "test"}
    data = rng.integers(0, 256, size=(100, 16)).astype(np.float32)
    wb.write_filterbank(tmp_path / "a.fil", header, data)
    h, d = wb.read_filterbank(tmp_path / "a.fil")
    assert h["source_name"] == "test" and h["nsamples"] == 100 and h["tstart"] == 60000.5
    assert np.array_equal(d, data.astype(np.uint8))
    # packed samples as stored (2 bits: 4 per byte)
    header2 = dict(header, nbits=2)
    raw = rng.integers(0, 256, size=(10, 4)).astype(np.uint8)
    wb.write_filterbank(tmp_path / "b.fil", header2, raw)
    f = wb.open_filterbank(tmp_path / "b.fil")
    assert np.array_equal(f.read_raw(10), raw)
    # round trip of a read header (sizes and format ignored)
    wb.write_filterbank(tmp_path / "c.fil", h, d)
    assert np.array_equal(wb.read_filterbank(tmp_path / "c.fil")[1], d)


def test_read_errors(tmp_path):
    with pytest.raises(OSError):
        wb.read_filterbank(tmp_path / "missing.fil")
    bad = tmp_path / "garbage.fil"
    bad.write_bytes(b"this is not a filterbank" * 10)
    with pytest.raises(wb.FormatError):
        wb.read_filterbank(bad)
    mat = tmp_path / "garbage.mat"
    mat.write_bytes(b"x" * 200)
    with pytest.raises((wb.FormatError, OSError)):
        wb.read_ultrasound(mat)
    with pytest.raises(wb.FormatError):
        wb.read_ultrasound(tmp_path / "data.xyz")


def test_bad_ranges(data):
    path = data("filterbank/small.fil")
    with pytest.raises(ValueError, match="start"):
        wb.read_filterbank(path, start=11)
    with pytest.raises(ValueError, match="nsamples"):
        wb.read_filterbank(path, start=5, nsamples=6)
    h, _ = wb.read_filterbank(path)
    with pytest.raises(ValueError, match="nsamples"):
        wb.open_filterbank(path).read(-1)


@pytest.mark.parametrize("header, data, exc, match", [
    ({"nchans": 4, "nbits": 8, "fch1": 1400.0, "foff": -1.0, "tsamp": 1e-3, "bogus": 1},
     np.zeros((3, 4), np.float32), ValueError, "bogus"),
    ({"nchans": 4, "nbits": 8, "fch1": 1400.0, "foff": -1.0, "tsamp": 1e-3},
     np.zeros((3, 5), np.float32), ValueError, "data"),
    ({"nchans": 4, "nbits": 8, "fch1": 1400.0, "foff": -1.0, "tsamp": 1e-3},
     np.zeros((3, 4), np.float64), TypeError, "data"),
    ({"nchans": 4, "nbits": 3, "fch1": 1400.0, "foff": -1.0, "tsamp": 1e-3},
     np.zeros((3, 4), np.float32), wb.FormatError, "nbits"),
    ({"nchans": 4, "nbits": 8, "fch1": 1400.0, "foff": -1.0, "tsamp": 0.0},
     np.zeros((3, 4), np.float32), wb.FormatError, "tsamp"),
])
def test_write_filterbank_bad_arguments_leave_no_file(tmp_path, header, data, exc, match):
    with pytest.raises(exc, match=match):
        wb.write_filterbank(tmp_path / "x.fil", header, data)
    assert_no_files(tmp_path)


def test_write_into_missing_folder_raises_oserror(tmp_path):
    h = {"nchans": 4, "nbits": 8, "fch1": 1400.0, "foff": -1.0, "tsamp": 1e-3}
    with pytest.raises(OSError):
        wb.write_filterbank(tmp_path / "no" / "x.fil", h, np.zeros((3, 4), np.float32))
    assert_no_files(tmp_path)


# UFF files as other writers make them: warpbeam walks an HDF5 file's metadata before libhdf5
# opens it (issue 18: libhdf5 allocated 8 GiB from a 23 kB file's lengths). The walk must not
# refuse what libhdf5 reads: h5py (its own, newer libhdf5) rewrites warpbeam's UFF file with a
# user block, newer object headers (libver v110: version 2 headers, compact and dense links,
# layout version 4), chunked gzip datasets, many attributes and groups of many links.
@pytest.mark.parametrize("variant", ["earliest", "userblock", "chunked", "v110", "many"])
def test_uff_from_other_hdf5_writers(tmp_path, cli, variant):
    import subprocess

    h5py = pytest.importorskip("h5py")
    src = tmp_path / "sim.uff"
    subprocess.run([cli, "simulate", "ultrasound", "--out", str(src), "--elements", "8",
                    "--samples", "64", "--angles", "-5,5"], check=True, capture_output=True)
    ref = wb.read_ultrasound(src)
    opts = {"userblock": {"userblock_size": 512}, "v110": {"libver": ("v110", "v110")},
            "many": {"libver": ("v110", "v110")}}.get(variant, {})
    chunk = variant in ("chunked", "v110", "many")
    dst = tmp_path / f"{variant}.uff"
    with h5py.File(src, "r") as a, h5py.File(dst, "w", **opts) as b:
        def copy(name, obj):
            if isinstance(obj, h5py.Dataset):
                v = obj[()]
                big = chunk and obj.ndim >= 1 and obj.size > 16
                b.create_dataset(name, data=v, **({"chunks": True, "compression": "gzip",
                                                  "shuffle": True} if big else {}))
            else:
                b.require_group(name)
            for k, val in obj.attrs.items():
                b[name].attrs[k] = val
        a.visititems(copy)
        if variant == "many":
            for i in range(40):
                b["channel_data"].attrs[f"extra{i}"] = np.arange(10) * i
            for i in range(50):  # more than 8 links: dense storage (a fractal heap, v2 B-tree)
                b.create_dataset(f"extras/x{i}", data=np.arange(i + 1))
    d = wb.read_ultrasound(dst)
    assert np.array_equal(d.data, ref.data)
    assert np.array_equal(d.elements, ref.elements)
    assert d.fs == ref.fs and d.c == ref.c
