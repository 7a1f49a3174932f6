"""Tutorial 2: beamform PyMUST's rotating-disk recording and show a B-mode.

    python3 examples/bmode.py [PWI_disk.mat] [OUT.png]

Reads the Verasonics RF (128 elements, 32 frames, one plane wave), demodulates it to I/Q as
PyMUST's rf2iq, delay-and-sums it onto a 251 x 251 grid with a receive f-number of 1.2 and
shows frame 0 with a 30 dB dynamic range. With CuPy and a GPU, pass the I/Q as a CuPy array:
the result is a CuPy array on the same device.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import warpbeam as wb  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
data = os.environ.get("WARPBEAM_DATA", os.path.join(here, "..", "..", "shared", "data"))
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(data, "ultrasound", "PWI_disk.mat")
out = sys.argv[2] if len(sys.argv) > 2 else "bmode.png"

d = wb.read_ultrasound(path)                  # RF [frame][rx][tx][sample], param
iq = wb.rf_to_iq(d.data, d.fs, d.fc, d.t0, d.bandwidth)
img = wb.das(iq, d.elements, "-12.5e-3:12.5e-3:1e-4,10e-3:35e-3:1e-4", d.fs, d.fc,
             t0=d.t0, c=d.c, transmits=d.transmits, fnumber=1.2)    # [frame][z][x]
db = wb.bmode(img, dynamic_range=30)
print(f"beamformed {img.shape[0]} frames of {img.shape[1]} x {img.shape[2]} pixels")

plt.figure(figsize=(5, 5))
plt.imshow(db[0], cmap="gray", extent=[-12.5, 12.5, 35, 10], vmin=-30, vmax=0)
plt.xlabel("x (mm)")
plt.ylabel("depth z (mm)")
plt.title("PWI_disk.mat, frame 0 (30 dB)")
plt.colorbar(label="dB")
plt.savefig(out, dpi=80)
print(f"wrote {out}")
