"""The overhead of a small warpbeam.das call from Python over the C++ execute (issue 15: <= 20
us on the H200).

    python3 bench/python/call_overhead.py [--repeats 2000] [--backend cuda|cpu] [--json FILE]

One DasPlan of a small shape (16 x 16 pixels, 32 rx, 64 IQ samples, 1 frame): the mean wall
time per call of `plan(data, out=out)` from Python (argument checks, stream lookup, DLPack,
nanobind, GIL release) minus that of the same execute() called `repeats` times from C++ with
the arrays checked once (_DasPlan.bench_execute), both on the same stream with one wait at the
end. On CUDA the arrays are CuPy's and the calls are queued, so the figure is the host cost of
a call. Also times the one-call warpbeam.das (which makes a plan each time) for reference.
"""
import argparse
import json
import time

import numpy as np

import warpbeam as wb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--json")
    a = ap.parse_args()
    el = wb.simulate.linear_array(32, 0.3e-3)
    grid = "-0.75e-3:0.75e-3:1e-4,10e-3:11.5e-3:1e-4"
    rng = np.random.default_rng(0)
    host = (rng.standard_normal((1, 32, 1, 64)) + 1j * rng.standard_normal((1, 32, 1, 64)))
    host = host.astype(np.complex64)
    plan = wb.DasPlan(el, grid, 64, 20e6, 5e6, t0=12e-6, fnumber=1.0, backend=a.backend)
    if a.backend == "cuda":
        import cupy as cp
        data = cp.asarray(host)
        out = cp.empty((1, plan.nvoxels), cp.complex64)
        sync = lambda: cp.cuda.get_current_stream().synchronize()  # noqa: E731
        stream = cp.cuda.get_current_stream().ptr
    else:
        data, out = host, np.empty((1, plan.nvoxels), np.complex64)
        sync, stream = (lambda: None), 0
    for _ in range(50):
        plan(data, out=out)
    sync()
    t0 = time.perf_counter()
    for _ in range(a.repeats):
        plan(data, out=out)
    sync()
    py = (time.perf_counter() - t0) / a.repeats
    cpp = plan._p.bench_execute(data, out, stream, a.repeats)
    t0 = time.perf_counter()
    n1 = max(a.repeats // 20, 10)
    for _ in range(n1):
        wb.das(data, el, grid, 20e6, 5e6, t0=12e-6, fnumber=1.0, backend=a.backend)
    sync()
    one_call = (time.perf_counter() - t0) / n1
    rec = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "backend": a.backend, "commit": wb.__git_commit__, "repeats": a.repeats,
           "python_call_us": py * 1e6, "cpp_execute_us": cpp * 1e6,
           "overhead_us": (py - cpp) * 1e6, "one_call_das_us": one_call * 1e6,
           "device": wb._warpbeam.device_description(0) if a.backend == "cuda" else "cpu"}
    print(f"{a.backend}: Python plan call {py * 1e6:.2f} us, C++ execute {cpp * 1e6:.2f} us, "
          f"overhead {(py - cpp) * 1e6:.2f} us; one-call das() {one_call * 1e6:.1f} us")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rec, f, indent=2)


if __name__ == "__main__":
    main()
