"""Shared fixtures: the real recordings (../shared/data or $WARPBEAM_DATA; tests skip, visibly,
without them), the CLI of the same build, and the GPU array libraries (GPU tests skip without a
device)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def data_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("WARPBEAM_DATA", ROOT.parent / "shared" / "data"))


def data_file(rel: str) -> pathlib.Path:
    p = data_dir() / rel
    if not p.exists():
        pytest.skip(f"data file {p} not found (set WARPBEAM_DATA)")
    return p


@pytest.fixture
def data():
    return data_file


@pytest.fixture
def cli():
    build = os.environ.get("WARPBEAM_BUILD_DIR")
    cands = [pathlib.Path(build) / "bin" / "warpbeam"] if build else []
    cands += [ROOT / "build" / "bin" / "warpbeam", ROOT / "build-cuda" / "bin" / "warpbeam"]
    for c in cands:
        if c.exists():
            return str(c)
    pytest.skip("no warpbeam CLI built (set WARPBEAM_BUILD_DIR)")


def assert_no_files(folder: pathlib.Path):
    """Nothing left in `folder` (no product, no temporary file)."""
    left = sorted(p.name for p in folder.iterdir())
    assert left == [], f"files left behind: {left}"
