"""The tutorials in examples/ run (CI runs them) and make their plots."""
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT, data_file


@pytest.mark.parametrize("script, data", [("search_filterbank.py", "filterbank/burst_28.fil"),
                                          ("bmode.py", "ultrasound/PWI_disk.mat")])
def test_tutorial_runs_and_plots(tmp_path, script, data):
    pytest.importorskip("matplotlib")
    path = data_file(data)
    png = tmp_path / "out.png"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(path), str(png)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert png.stat().st_size > 10000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if script == "search_filterbank.py":
        assert "DM 473" in r.stdout
        assert (tmp_path / "candidates.cand").stat().st_size > 0
