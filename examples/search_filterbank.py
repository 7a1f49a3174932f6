"""Tutorial 1: search a filterbank for dispersed pulses and plot the best candidate.

    python3 examples/search_filterbank.py [FILE.fil] [OUT.png]

Without a file it searches the real burst ../shared/data/filterbank/burst_28.fil (or
$WARPBEAM_DATA/filterbank/burst_28.fil). The plot shows the candidate's dynamic spectrum
dedispersed at its DM (channels shifted by their delays), its pulse profile, and the S/N of
every candidate against DM and time.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import warpbeam as wb  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
data = os.environ.get("WARPBEAM_DATA", os.path.join(here, "..", "..", "shared", "data"))
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(data, "filterbank", "burst_28.fil")
out = sys.argv[2] if len(sys.argv) > 2 else "candidate.png"

cands = wb.search(path, dm_max=1000)          # the same search as `warpbeam search`
best = cands[0]
print(f"{len(cands)} candidates; best: S/N {best['snr']:.1f} at {best['time_s']:.3f} s, "
      f"DM {best['dm']:.1f}, width {2 ** best['filter']} samples")
cands.to_cand("candidates.cand")              # heimdall's columns, as the CLI writes them

# The data around the candidate, dedispersed at its DM.
header, fb = wb.read_filterbank(path)         # memory-mapped [time][chan]
tsamp, nchans = header["tsamp"], header["nchans"]
dd = wb.Dedisperser(nchans, header["fch1"], header["foff"], tsamp, [best["dm"]], backend="cpu")
delays = dd.delays[0]                          # samples, per channel
half = 200
t0 = max(int(best["sample"]) - half, 0)
t1 = min(int(best["sample"]) + half, header["nsamples"] - int(delays.max()))
rows = np.arange(t0, t1)
block = np.stack([np.asarray(fb[rows + d, c], dtype=np.float32)
                  for c, d in enumerate(delays)], axis=1)
block -= np.median(block, axis=0)
profile = block.sum(axis=1)

fig, ax = plt.subplots(3, 1, figsize=(7, 9))
t = (rows - best["sample"]) * tsamp * 1e3
ax[0].plot(t, profile)
ax[0].set(xlabel="time from the candidate (ms)", ylabel="sum over channels",
          title=f"DM {best['dm']:.1f} pc cm$^{{-3}}$, S/N {best['snr']:.1f}")
freqs = header["fch1"] + header["foff"] * np.arange(nchans)
ax[1].imshow(block.T, aspect="auto", origin="upper", cmap="viridis",
             extent=[t[0], t[-1], freqs[-1], freqs[0]])
ax[1].set(xlabel="time from the candidate (ms)", ylabel="frequency (MHz)")
sc = ax[2].scatter(cands["time_s"], cands["dm"], s=4 * cands["snr"], c=cands["snr"])
ax[2].set(xlabel="time (s)", ylabel="DM (pc cm$^{-3}$)")
fig.colorbar(sc, ax=ax[2], label="S/N")
fig.tight_layout()
fig.savefig(out, dpi=80)
print(f"wrote {out}")
