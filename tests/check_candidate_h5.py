#!/usr/bin/env python3
"""Checks a candidate HDF5 file written by `warpbeam search --candidates-dir` against the layout
that FETCH and `your` read (docs/FORMATS.md, "Candidate cutouts"), for test_candidates:

    check_candidate_h5.py CAND.h5 FIL OUT_DIR

* h5py: data_freq_time and data_dm_time are float32 (256, 256) with the dimension labels your
  writes, every attribute your's plot_h5 and Candidate write is there, and FETCH's
  preprocessing (its DataGenerator / predict_onnx: transpose, detrend, reshape to (256, 256, 1))
  runs on the arrays;
* your (when installed): plot_h5 draws the file, and your's own Candidate (get_chunk, dmtime,
  dedisperse, decimate, crop, resize, normalise: your_candmaker's CPU path) made from FIL at the
  file's DM, tcand, width and S/N gives arrays that correlate with the file's (> 0.9) and peak at
  the same place.
Prints one JSON line of findings; exits 1 on a failed check, 77 without h5py.
"""

import json
import os
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"check_candidate_h5.py: {e}: skipped", file=sys.stderr)
    sys.exit(77)

YOUR_ATTRS = ["cand_id", "tcand", "dm", "dm_opt", "snr", "snr_opt", "width", "label", "fch1",
              "foff", "nchans", "tsamp", "tstart", "nspectra", "filelist", "source_name",
              "native_tsamp", "native_foff", "native_nchans", "native_nspectra", "kill_mask",
              "rfi_mask", "format", "dtype", "nbits", "tstart_utc"]


def fail(msg):
    print(json.dumps({"error": msg}))
    sys.exit(1)


def corr(a, b):
    a = (a - a.mean()) / a.std()
    b = (b - b.mean()) / b.std()
    return float((a * b).mean())


def main():
    path, fil, out = sys.argv[1:4]
    found = {}
    with h5py.File(path, "r") as f:
        ft = np.array(f["data_freq_time"])
        dmt = np.array(f["data_dm_time"])
        for name, arr, labels in (("data_freq_time", ft, ["time", "frequency"]),
                                  ("data_dm_time", dmt, ["dm", "time"])):
            if arr.shape != (256, 256) or arr.dtype != np.float32:
                fail(f"{name} is {arr.shape} {arr.dtype}")
            got = [d.label for d in f[name].dims]
            if got != labels:
                fail(f"{name} dimension labels {got}, not {labels}")
        missing = [a for a in YOUR_ATTRS if a not in f.attrs]
        if missing:
            fail(f"attributes missing: {missing}")
        attrs = {k: f.attrs[k] for k in ("dm", "tcand", "width", "snr", "nchans", "tsamp")}
        # FETCH's preprocessing (fetch/data_sequence.py, src/fetch/predict_onnx.py).
        import scipy.signal as s
        x = s.detrend(np.nan_to_num(np.array(f["data_freq_time"], dtype=np.float32).T))
        x = np.reshape((x - np.median(x)) / np.std(x), (256, 256, 1))
        y = np.nan_to_num(np.array(f["data_dm_time"], dtype=np.float32))
        y = np.reshape((y - np.median(y)) / np.std(y), (256, 256, 1))
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            fail("FETCH's preprocessing gives non-finite values")
    found["attrs"] = {k: float(v) for k, v in attrs.items()}
    found["ft_profile_peak"] = int(np.argmax(ft.mean(1)))
    found["dmt_peak"] = [int(i) for i in np.unravel_index(np.argmax(dmt), dmt.shape)]

    try:
        from your.candidate import Candidate, crop
        from your.utils.math import normalise
        from your.utils.plotter import plot_h5
    except ImportError as e:
        found["your"] = f"not installed: {e}"
        print(json.dumps(found))
        return
    plot_h5(path, save=True, outdir=out + "/")
    png = os.path.join(out, os.path.basename(path)[:-3] + ".png")
    if not os.path.getsize(png):
        fail("your's plot_h5 wrote nothing")
    found["your_png"] = png
    # your_candmaker's CPU path (bin/your_candmaker.py: cpu_dedisp_dmt, cand2h5).
    width = int(attrs["width"])
    cand = Candidate(fp=fil, dm=float(attrs["dm"]), tcand=float(attrs["tcand"]), width=width,
                     snr=float(attrs["snr"]))
    cand.get_chunk(for_preprocessing=True)
    factor = 1 if width == 1 else width // 2
    cand.dmtime()
    cand.dedisperse()
    cand.decimate(key="ft", axis=0, pad=True, decimate_factor=factor, mode="median")
    cand.dedispersed = crop(cand.dedispersed, cand.dedispersed.shape[0] // 2 - 128, 256, 0)
    cand.decimate(key="dmt", axis=1, pad=True, decimate_factor=factor, mode="median")
    cand.dmt = crop(cand.dmt, cand.dmt.shape[1] // 2 - 128, 256, 1)
    cand.resize(key="ft", size=256, axis=1, anti_aliasing=True, mode="constant")
    your_ft, your_dmt = normalise(cand.dedispersed), normalise(cand.dmt)
    found["corr_ft"] = corr(ft, your_ft)
    found["corr_dmt"] = corr(dmt, your_dmt)
    # Rows 64 .. 191 (DM / 2 to 3 DM / 2): where your's shifts do not wrap around its window.
    found["corr_dmt_centre"] = corr(dmt[64:192], your_dmt[64:192])
    found["your_ft_profile_peak"] = int(np.argmax(your_ft.mean(1)))
    found["your_dmt_peak"] = [int(i) for i in np.unravel_index(np.argmax(your_dmt),
                                                                 your_dmt.shape)]
    print(json.dumps(found))


if __name__ == "__main__":
    main()
