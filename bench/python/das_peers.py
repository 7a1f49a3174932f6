"""warpbeam.das against its peers on the same CuPy arrays, in one process: mach.beamform (PyPI
mach-beamform) and ffdas.das (PyPI ffdas), for DESIGN.md's U1 and U2.

    python3 bench/python/das_peers.py [--repeats 20] [--json FILE]

U1 (PyMUST rotating disk): PWI_disk.mat's RF demodulated to IQ (warpbeam.rf_to_iq), 251 x 251
pixels, 128 rx, 334 IQ samples, 32 frames, one plane wave, receive f-number 1, boxcar (mach's
benchmark). U2: the geometry of `warpbeam bench das --config U2` (src/das/geometry.cpp), so that
the figures compare with the C++ records: a 32 x 32 matrix probe (1024 rx, pitch 0.3 mm), 512
random IQ samples at 6 MHz (fc 3 MHz), one plane wave, 64^3 voxels over x, y in [-9.6, 9.6] mm and
z in [10, 50] mm, batch 128, full aperture. (Until 2026-12-08 this script used another U2, at 20
MHz over [-4.8, 4.8] x [5, 15] mm: its records compare only within one run of it.) Each peer gets
the same device arrays in its own layout (the layout change is not timed); times are the median of
--repeats runs by CUDA events after a warm-up, on the current stream. Results are cross-checked:
the Pearson correlation of the envelopes and the relative L2 difference to warpbeam's fp32 result.
ffdas runs every one of its algorithm variants in fp32 and fp16 arithmetic; "ffdas-best" is the
fastest of those that agree with warpbeam's fp32 result (envelope correlation >= 0.99). A peer that
is not installed is reported as missing, not timed.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import warpbeam as wb

try:
    import cupy as cp
except ImportError:
    sys.exit("das_peers.py needs CuPy and a CUDA device")


def timed(fn, repeats):
    fn()
    cp.cuda.get_current_stream().synchronize()
    ts = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def compare(ref, got):
    r, g = cp.abs(ref).ravel(), cp.abs(got).ravel()
    corr = float(cp.corrcoef(r, g)[0, 1])
    rel = float(cp.linalg.norm(r - g) / cp.linalg.norm(r))
    return corr, rel


def u1():
    data = os.environ.get("WARPBEAM_DATA", os.path.join(os.path.dirname(__file__), "..", "..",
                                                        "..", "shared", "data"))
    d = wb.read_ultrasound(os.path.join(data, "ultrasound", "PWI_disk.mat"))
    iq = wb.rf_to_iq(d.data, d.fs, d.fc, d.t0, d.bandwidth)  # [32][128][1][334]
    pts, shape = wb.grid_points("-12.5e-3:12.5e-3:1e-4,10e-3:35e-3:1e-4")
    return dict(name="U1", iq=iq, elements=d.elements, points=pts, fs=d.fs, fc=d.fc, t0=d.t0,
                c=d.c, fnumber=1.0)


def u2():
    nx = 32
    pitch = 0.3e-3
    ix = (np.arange(nx) - (nx - 1) / 2) * pitch
    ex, ey = np.meshgrid(ix, ix)
    elements = np.stack([ex.ravel(), ey.ravel(), np.zeros(nx * nx)], axis=1)
    ax = np.linspace(-9.6e-3, 9.6e-3, 64)
    zs = np.linspace(10e-3, 50e-3, 64)
    z, y, x = np.meshgrid(zs, ax, ax, indexing="ij")
    pts = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1)
    rng = np.random.default_rng(1)
    iq = (rng.standard_normal((128, nx * nx, 1, 512)) +
          1j * rng.standard_normal((128, nx * nx, 1, 512))).astype(np.complex64)
    return dict(name="U2", iq=iq, elements=elements, points=pts, fs=6e6, fc=3e6, t0=0.0,
                c=1540.0, fnumber=None)


def run(cfg, repeats):
    rec = {"config": cfg["name"]}
    iq = cp.asarray(cfg["iq"])
    batch, nrx, _, ns = iq.shape
    pts = cfg["points"]
    tx = pts[:, 2] / cfg["c"]  # unsteered plane wave: tau_tx = z / c
    res = {}
    for storage, algo in (("fp32", "auto"), ("fp16", "auto")):
        plan = wb.DasPlan(cfg["elements"], pts, ns, cfg["fs"], cfg["fc"], batch=batch,
                          t0=cfg["t0"], c=cfg["c"], tx_delays=tx, fnumber=cfg["fnumber"],
                          storage=storage, algorithm=algo, backend="cuda")
        out = cp.empty((batch, pts.shape[0]), cp.complex64)
        ms = timed(lambda: plan(iq, out=out), repeats)
        res[f"warpbeam-{storage}"] = (ms, out.copy(), plan.algorithm)
    ref = res["warpbeam-fp32"][1]
    best_wb = min(res["warpbeam-fp32"][0], res["warpbeam-fp16"][0])
    try:
        import mach
        ch = cp.ascontiguousarray(iq[:, :, 0, :].transpose(1, 2, 0))  # (n_rx, n_samples, frames)
        rx = cp.asarray(cfg["elements"], cp.float32)
        sc = cp.asarray(pts, cp.float32)
        arr = cp.asarray(tx, cp.float32)
        mout = cp.empty((pts.shape[0], batch), cp.complex64)
        fnum = cfg["fnumber"] if cfg["fnumber"] else 1e-6  # ~ full aperture
        call = lambda: mach.beamform(ch, rx, sc, arr, out=mout, rx_start_s=cfg["t0"],  # noqa
                                     sampling_freq_hz=cfg["fs"], f_number=fnum,
                                     sound_speed_m_s=cfg["c"], modulation_freq_hz=cfg["fc"],
                                     tukey_alpha=0.0)
        ms = timed(call, repeats)
        res["mach"] = (ms, mout.T.copy(), "mach.beamform")
    except ImportError as e:
        rec["mach"] = f"missing: {e}"
    try:
        import ffdas
        lam = cfg["c"] / cfg["fs"]  # positions in sampling wavelengths, offsets in samples
        src = cp.asarray(cfg["elements"] / lam, cp.float32)
        dst = cp.asarray(pts / lam, cp.float32)
        off = cp.asarray(((tx - cfg["t0"]) * cfg["fs"])[None], cp.float32)
        w = cp.ones((1, pts.shape[0]), cp.float32)
        x = cp.ascontiguousarray(iq)  # (batch, channels, sequence, samples)
        best = None
        for sign in (-1.0, 1.0):  # the phase convention: keep the sign that agrees
            fo = ffdas.das(x, src, dst, off, w, wavenum=sign * 2 * np.pi * cfg["fc"] / cfg["fs"])
            c_, _ = compare(ref, fo)
            if best is None or c_ > best[1]:
                best = (sign, c_)
        k = best[0] * 2 * np.pi * cfg["fc"] / cfg["fs"]
        # Every algorithm variant of ffdas, fp32 and fp16 arithmetic: each is timed and checked;
        # "ffdas-best" is the fastest whose envelope agrees with warpbeam's fp32 result
        # (correlation >= 0.99), so a variant returning garbage (the issue saw ffdas's batch-inner
        # fp16 at relative error 1e32 on U1) is reported but never counted as the best.
        fastest = None
        for alg in ffdas.Algorithm:
            for fp16 in (False, True):
                fout = cp.empty((batch, pts.shape[0]), cp.complex64)
                call = lambda: ffdas.das(x, src, dst, off, w, wavenum=k, out=fout,  # noqa
                                         algorithm=alg, use_fp16=fp16)
                name = f"ffdas-{alg.name.lower()}{'-fp16' if fp16 else ''}"
                try:
                    ms = timed(call, repeats)
                except Exception as e:  # a variant this shape does not support
                    rec[name] = f"failed: {type(e).__name__}: {e}"
                    print(f"{cfg['name']} {name:15s} {rec[name]}")
                    continue
                what = (f"ffdas.das algorithm={alg.name} use_fp16={fp16} "
                        f"(wavenum sign {best[0]:+.0f})")
                res[name] = (ms, fout.copy(), what)
                if compare(ref, fout)[0] >= 0.99 and (fastest is None or ms < fastest[0]):
                    fastest = (ms, name)
        if fastest is not None:
            rec["ffdas_best"] = fastest[1]
            res["ffdas-best"] = (fastest[0], res[fastest[1]][1], f"= {fastest[1]}")
    except ImportError as e:
        rec["ffdas"] = f"missing: {e}"
    points = batch * nrx * pts.shape[0]
    base = res["warpbeam-fp32"][0]
    for name, (ms, out, what) in res.items():
        corr, rel = compare(ref, out)
        rec[name] = {"ms": ms, "points_per_s": points / (ms * 1e-3), "what": what,
                     "envelope_correlation_vs_warpbeam_fp32": corr,
                     "relative_l2_vs_warpbeam_fp32": rel, "ratio_to_warpbeam_fp32": ms / base,
                     "ratio_to_warpbeam_best": ms / best_wb}
        print(f"{cfg['name']} {name:15s} {ms:9.3f} ms  {points / (ms * 1e-3):.3e} points/s  "
              f"x{ms / base:6.2f} (x{ms / best_wb:6.2f} of warpbeam's best)  corr {corr:.5f}  "
              f"relL2 {rel:.2e}  ({what})")
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    records = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "device": wb._warpbeam.device_description(0), "warpbeam": wb.__version__,
               "commit": wb.__git_commit__, "runs": [run(u1(), a.repeats), run(u2(), a.repeats)]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(records, f, indent=2)


if __name__ == "__main__":
    main()
