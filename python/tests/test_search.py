"""search(): the CLI's .cand byte for byte on the real burst, the Candidates array and its
files, an array searched with its header, and the bad-argument cases (no output file)."""
import json
import subprocess

import numpy as np
import pytest

import warpbeam as wb
from conftest import assert_no_files


def test_burst_28_to_cand_is_the_clis_cand_byte_for_byte(data, cli, tmp_path):
    path = data("filterbank/burst_28.fil")
    subprocess.run([cli, "search", str(path), "--output", str(tmp_path / "cli.cand")],
                   check=True, capture_output=True)
    cands = wb.search(path)
    cands.to_cand(tmp_path / "py.cand")
    cli_bytes = (tmp_path / "cli.cand").read_bytes()
    assert len(cli_bytes) > 0
    assert (tmp_path / "py.cand").read_bytes() == cli_bytes
    # the published burst: DM ~475, ~2.03 s (data/README.md)
    best = cands[0]
    assert abs(best["dm"] - 475) < 10 and abs(best["time_s"] - 2.03) < 0.02
    assert best["snr"] > 10
    assert cands.format_cand() == cli_bytes.decode()
    assert isinstance(cands, wb.Candidates) and cands.dtype == wb.CANDIDATE_DTYPE
    assert np.all(np.diff(cands["snr"]) <= 0)


def test_candidates_files(data, tmp_path):
    cands = wb.search(data("filterbank/burst_28.fil"), dm_max=600, snr_min=8)
    cands.to_json(tmp_path / "c.json")
    j = json.loads((tmp_path / "c.json").read_text())
    assert j["format"] == "warpbeam-candidates"
    assert len(j["candidates"]) == len(cands)
    assert j["candidates"][0]["snr"] == pytest.approx(float(cands[0]["snr"]), rel=1e-6)
    assert j["parameters"]["dm_max"] == 600
    assert len(j["dms"]) == len(cands.dms)
    cands.to_cand(tmp_path / "c.cand", with_beam=True)
    back = wb.read_cand(tmp_path / "c.cand")
    assert np.array_equal(back["sample"], cands["sample"])
    assert np.allclose(back["snr"], cands["snr"], rtol=1e-5)
    pd = pytest.importorskip("pandas")
    df = cands.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == list(wb.CANDIDATE_DTYPE.names)


def test_an_array_is_searched_with_its_header(tmp_path):
    info = wb.simulate.filterbank(tmp_path / "sim.fil", bursts=[(150.0, 25.0, 2e-3, 2.0)],
                                  nchans=64, fch1=1500.0, foff=-4.0, tsamp=256e-6,
                                  duration=5.0, seed=3)
    assert info["bursts"][0]["dm"] == 150
    h, d = wb.read_filterbank(tmp_path / "sim.fil")
    from_file = wb.search(tmp_path / "sim.fil", dm_max=300)
    from_array = wb.search(np.asarray(d), header=h, dm_max=300)
    assert from_file.format_cand() == from_array.format_cand()
    best = from_array[0]
    assert abs(best["dm"] - 150) < 5 and abs(best["time_s"] - 2.0) < 5e-3
    assert from_array.file == ""


@pytest.mark.parametrize("options, exc, match", [
    ({"dm_max": -1.0}, ValueError, "dm"),
    ({"snr_min": 0.0}, ValueError, "snr"),
    ({"boxcar_max": 3}, ValueError, "boxcar"),
    ({"dm_maximum": 100}, TypeError, "dm_maximum"),
])
def test_bad_options_raise_and_write_nothing(data, tmp_path, options, exc, match):
    path = data("filterbank/burst_28.fil")
    with pytest.raises(exc, match=match):
        wb.search(path, **options)
    assert_no_files(tmp_path)


def test_bad_files(tmp_path):
    with pytest.raises(OSError):
        wb.search(tmp_path / "missing.fil")
    (tmp_path / "bad.fil").write_bytes(b"\0" * 100)
    with pytest.raises(wb.FormatError):
        wb.search(tmp_path / "bad.fil")
    with pytest.raises(ValueError, match="header"):
        wb.search(np.zeros((10, 4), np.float32))


def test_file_shorter_than_the_delay(data):
    with pytest.raises(ValueError, match="dm"):
        wb.search(data("filterbank/small.fil"), dm_max=1000)


def test_to_cand_into_missing_folder(data, tmp_path):
    cands = wb.search(data("filterbank/burst_28.fil"), dm_max=600)
    with pytest.raises(OSError):
        cands.to_cand(tmp_path / "no" / "x.cand")
    assert_no_files(tmp_path)
