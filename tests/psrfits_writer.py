#!/usr/bin/env python3
"""PSRFITS search-mode files for test_psrfits, written by an independent writer (astropy.io.fits).

    psrfits_writer.py SUITE_DIR [--data DIR] [FIL ...]

(--data: the real-data folder, $WARPBEAM_DATA when set; its filterbank/burst_28.fil and
parkes_2bit.fil are the FILs when both are there.) Exits 77 (ctest's skip) without astropy.

writes into SUITE_DIR, and lists in SUITE_DIR/manifest.json:
  * synthetic files of every sample layout (1/2/4/8-bit as bytes 'B' or bits 'X', signed and
    unsigned 16-bit 'I', float 'E'; NPOL 1, 2 (AABB) and 4 (AABBCRCI, IQUV); either channel
    order; DAT_SCL/DAT_OFFS/DAT_WTS/ZERO_OFF that vary per row and channel; NSTOT < rows x
    NSBLK), each with the values a reader must return, computed here with NumPy from the PSRFITS
    definition, as a SIGPROC float32 filterbank `NAME.expected.fil`;
  * for each FIL given (a SIGPROC filterbank, e.g. burst_28.fil): `STEM.fits` (the same samples,
    unscaled, NPOL 1) and, for the first FIL only, `STEM_4pol.fits` (AABBCRCI with AA + BB = the samples),
    `STEM_reversed.fits` (ascending frequency: channels in the opposite order),
    `STEM_scaled.fits` (DAT_SCL 1.75, DAT_OFFS -13 in every row and channel: the same S/N) and
    `STEM_rescaled.fits` (DAT_SCL/DAT_OFFS per row and channel, with
    `STEM_rescaled.expected.fil`);
  * malformed files: no SUBINT table, NBITS 3, NSBLK 0, rows cut off the end of the file.

The PSRFITS layout (ATNF PSRFITS definition v6.1): a primary header with FITSTYPE = 'PSRFITS',
OBS_MODE = 'SEARCH' and the start STT_IMJD/STT_SMJD/STT_OFFS; a SUBINT binary table whose rows
hold NSBLK samples; DATA in the order [NSBLK][NPOL][NCHAN] (TDIM (NCHAN, NPOL, NSBLK) with
NBIN 1), sub-byte samples first-in-the-high-bits; value = (DATA - ZERO_OFF) * DAT_SCL + DAT_OFFS,
times DAT_WTS; OFFS_SUB is the offset of the row's centre from the start.
"""

import json
import os
import struct
import sys

try:
    import numpy as np
    from astropy.io import fits
except ImportError as e:  # a user's machine without the test references
    print(f"psrfits_writer.py: {e}: skipped", file=sys.stderr)
    sys.exit(77)

SIGPROC_INT = {"telescope_id", "machine_id", "data_type", "nchans", "nbits", "nifs", "nbeams",
               "ibeam", "barycentric", "pulsarcentric", "nsamples"}
SIGPROC_DOUBLE = {"fch1", "foff", "tstart", "tsamp", "src_raj", "src_dej", "az_start",
                  "za_start", "refdm", "period"}
SIGPROC_STRING = {"source_name", "rawdatafile"}


# --- SIGPROC (read and write), from the SIGPROC user guide -------------------------------------

def read_sigproc(path):
    """Header dict and samples [time][chan] (float64) of a SIGPROC filterbank."""
    with open(path, "rb") as f:
        blob = f.read()
    pos = 0

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<i", blob, pos)
        s = blob[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        return s

    assert string() == "HEADER_START"
    hdr = {}
    while True:
        key = string()
        if key == "HEADER_END":
            break
        if key in SIGPROC_INT:
            (hdr[key],) = struct.unpack_from("<i", blob, pos)
            pos += 4
        elif key in SIGPROC_DOUBLE:
            (hdr[key],) = struct.unpack_from("<d", blob, pos)
            pos += 8
        elif key in SIGPROC_STRING:
            hdr[key] = string()
        elif key == "signed":
            pos += 1
        else:
            raise ValueError(f"unknown SIGPROC keyword {key}")
    nchan, nbits = hdr["nchans"], hdr["nbits"]
    raw = np.frombuffer(blob, dtype=np.uint8, offset=pos)
    if nbits == 8:
        data = raw.astype(np.float64)
    elif nbits < 8:  # SIGPROC packs the first sample in the lowest bits
        per = 8 // nbits
        shifts = np.arange(per) * nbits
        data = ((raw[:, None] >> shifts) & ((1 << nbits) - 1)).reshape(-1).astype(np.float64)
    else:
        raise ValueError(f"nbits {nbits} not handled here")
    nsamp = data.size // nchan
    return hdr, data[: nsamp * nchan].reshape(nsamp, nchan)


def write_sigproc_float(path, hdr, data):
    """A SIGPROC float32 (nbits 32) filterbank of data [time][chan]."""
    def s(x):
        return struct.pack("<i", len(x)) + x.encode()

    out = s("HEADER_START")
    for key in ("source_name",):
        out += s(key) + s(hdr.get(key, "test"))
    ints = {"telescope_id": hdr.get("telescope_id", 0), "machine_id": 0, "data_type": 1,
            "nchans": data.shape[1], "nbits": 32, "nifs": 1}
    for key, v in ints.items():
        out += s(key) + struct.pack("<i", v)
    for key in ("fch1", "foff", "tstart", "tsamp"):
        out += s(key) + struct.pack("<d", hdr[key])
    out += s("HEADER_END")
    with open(path, "wb") as f:
        f.write(out + np.ascontiguousarray(data, dtype="<f4").tobytes())


# --- PSRFITS writer ------------------------------------------------------------------------------

def pack_msb_first(values, nbits):
    """Packs unsigned nbits integers (flat), first sample in the highest bits of each byte."""
    if nbits == 8:
        return values.astype(np.uint8)
    bits = ((values[:, None] >> np.arange(nbits - 1, -1, -1)) & 1).astype(np.uint8).reshape(-1)
    bits = np.concatenate([bits, np.zeros((-bits.size) % 8, dtype=np.uint8)])
    return np.packbits(bits)  # numpy packs MSB first, as FITS 'X' columns are


def write_psrfits(path, *, stored, nbits, storage, fch1, foff, tsamp, tstart, npol=1,
                  pol_type="AA+BB", scl=None, offs=None, wts=None, zero_off=None, signint=0,
                  nstot=None, source="TEST", telescope="GMRT", ra="05:34:31.97",
                  dec="+22:00:52.1", unsigned16=False, keys=None, truncate_rows=0,
                  no_subint=False, primary_keys=None):
    """stored: [nrows][nsblk][npol][nchan] integers (or floats for storage 'E')."""
    nrows, nsblk, npol_, nchan = stored.shape
    assert npol_ == npol
    freqs = fch1 + foff * np.arange(nchan)
    prim = fits.PrimaryHDU()
    h = prim.header
    h["HDRVER"] = "6.1"
    h["FITSTYPE"] = "PSRFITS"
    h["TELESCOP"] = telescope
    h["OBS_MODE"] = "SEARCH"
    h["OBSFREQ"] = float(freqs.mean())
    h["OBSBW"] = float(foff * nchan)
    h["OBSNCHAN"] = nchan
    h["SRC_NAME"] = source
    h["RA"] = ra
    h["DEC"] = dec
    imjd = int(np.floor(tstart))
    sec = (tstart - imjd) * 86400.0
    h["STT_IMJD"] = imjd
    h["STT_SMJD"] = int(np.floor(sec))
    h["STT_OFFS"] = sec - np.floor(sec)
    for k, v in (primary_keys or {}).items():
        h[k] = v
    if no_subint:
        fits.HDUList([prim]).writeto(path, overwrite=True)
        return
    scl = np.ones((nrows, npol * nchan), np.float32) if scl is None else scl
    offs = np.zeros((nrows, npol * nchan), np.float32) if offs is None else offs
    wts = np.ones((nrows, nchan), np.float32) if wts is None else wts
    tsub = nsblk * tsamp
    cols = [
        fits.Column(name="TSUBINT", format="1D", unit="s", array=np.full(nrows, tsub)),
        fits.Column(name="OFFS_SUB", format="1D", unit="s",
                    array=(np.arange(nrows) + 0.5) * tsub),
        fits.Column(name="TEL_AZ", format="1E", unit="deg", array=np.full(nrows, 12.5)),
        fits.Column(name="TEL_ZEN", format="1E", unit="deg", array=np.full(nrows, 30.25)),
        fits.Column(name="DAT_FREQ", format=f"{nchan}E", unit="MHz",
                    array=np.tile(freqs.astype(np.float32), (nrows, 1))),
        fits.Column(name="DAT_WTS", format=f"{nchan}E", array=wts),
        fits.Column(name="DAT_OFFS", format=f"{npol * nchan}E", array=offs),
        fits.Column(name="DAT_SCL", format=f"{npol * nchan}E", array=scl),
    ]
    nvals = nsblk * npol * nchan
    if storage == "E":
        cols.append(fits.Column(name="DATA", format=f"{nvals}E", dim=f"(1,{nchan},{npol},{nsblk})",
                                array=stored.reshape(nrows, nvals).astype(np.float32)))
    elif storage == "I":
        if unsigned16:
            arr = stored.reshape(nrows, nvals).astype(np.uint16)
            cols.append(fits.Column(name="DATA", format=f"{nvals}I", bzero=32768,
                                    dim=f"(1,{nchan},{npol},{nsblk})", array=arr))
        else:
            cols.append(fits.Column(name="DATA", format=f"{nvals}I",
                                    dim=f"(1,{nchan},{npol},{nsblk})",
                                    array=stored.reshape(nrows, nvals).astype(np.int16)))
    else:
        mask = (1 << nbits) - 1
        rows = [pack_msb_first(r.reshape(-1).astype(np.int64) & mask, nbits) for r in stored]
        packed = np.stack(rows)
        if storage == "B":
            dim = f"(1,{nchan},{npol},{nsblk})" if nbits == 8 else None
            cols.append(fits.Column(name="DATA", format=f"{packed.shape[1]}B", dim=dim,
                                    array=packed))
        else:  # 'X': one bit per element, nvals * nbits of them
            nb = nvals * nbits
            bits = np.unpackbits(packed, axis=1)[:, :nb].astype(bool)
            cols.append(fits.Column(name="DATA", format=f"{nb}X", array=bits))
    sub = fits.BinTableHDU.from_columns(cols, name="SUBINT")
    sh = sub.header
    sh["NPOL"] = npol
    sh["POL_TYPE"] = pol_type
    sh["TBIN"] = tsamp
    sh["NBIN"] = 1
    sh["NBITS"] = nbits
    sh["ZERO_OFF"] = 0.0 if zero_off is None else float(zero_off)
    sh["SIGNINT"] = signint
    sh["NSUBOFFS"] = 0
    sh["NCHAN"] = nchan
    sh["CHAN_BW"] = foff
    sh["NCHNOFFS"] = 0
    sh["NSBLK"] = nsblk
    if nstot is not None:
        sh["NSTOT"] = nstot
    for k, v in (keys or {}).items():
        sh[k] = v
    fits.HDUList([prim, sub]).writeto(path, overwrite=True)
    if truncate_rows:
        # Cut whole rows (and the FITS padding) off the end: the rows are no longer all there.
        with fits.open(path) as hl:
            start = hl.fileinfo(1)["datLoc"]
            row = hl[1].header["NAXIS1"]
        with open(path, "r+b") as f:
            f.truncate(start + row * (nrows - truncate_rows) + row // 2)


def expected_values(stored, scl, offs, wts, zero_off, pol_sum):
    """Total intensity [time][chan] a reader returns, from the PSRFITS definition."""
    nrows, nsblk, npol, nchan = stored.shape
    v = (stored.astype(np.float64) - zero_off) * scl.reshape(nrows, 1, npol, nchan) \
        + offs.reshape(nrows, 1, npol, nchan)
    if pol_sum == "AA+BB":
        v = v[:, :, 0, :] + v[:, :, 1, :]
    else:
        v = v[:, :, 0, :]
    v = v * wts.reshape(nrows, 1, nchan)
    return v.reshape(nrows * nsblk, nchan).astype(np.float32)


# --- the suite -----------------------------------------------------------------------------------

def synthetic_cases(out, rng):
    cases = []
    base = dict(fch1=1500.0, foff=-0.5, tsamp=64e-6, tstart=60123.456789012345)

    def case(name, *, nbits, storage, nchan=24, nsblk=16, nrows=5, npol=1, pol_type="AA+BB",
             pol_sum="first", scaled=False, signed=False, zero_off=0.0, ascending=False,
             unsigned16=False, nstot=None, want_nbits=None):
        if storage == "E":
            stored = rng.normal(10, 3, (nrows, nsblk, npol, nchan)).astype(np.float32)
        elif signed:
            lo, hi = -(1 << (nbits - 1)), (1 << (nbits - 1)) - 1
            stored = rng.integers(lo, hi + 1, (nrows, nsblk, npol, nchan))
        else:
            stored = rng.integers(0, (1 << nbits), (nrows, nsblk, npol, nchan))
        scl = np.ones((nrows, npol * nchan), np.float32)
        offs = np.zeros((nrows, npol * nchan), np.float32)
        wts = np.ones((nrows, nchan), np.float32)
        if scaled:
            scl = rng.uniform(0.5, 2.0, scl.shape).astype(np.float32)
            offs = rng.uniform(-3, 3, offs.shape).astype(np.float32)
            wts = rng.uniform(0.5, 1.0, wts.shape).astype(np.float32)
            wts[:, 3] = 0  # a flagged channel
        p = dict(base)
        if ascending:
            p["fch1"], p["foff"] = 1500.0 - 0.5 * (nchan - 1), 0.5
        fname = os.path.join(out, f"{name}.fits")
        write_psrfits(fname, stored=stored, nbits=nbits, storage=storage, npol=npol,
                      pol_type=pol_type, scl=scl, offs=offs, wts=wts, zero_off=zero_off,
                      signint=1 if (signed and storage in "BX") else 0, nstot=nstot,
                      unsigned16=unsigned16, **p)
        values = expected_values(stored, scl, offs, wts, zero_off, pol_sum)
        if nstot is not None:
            values = values[:nstot]
        write_sigproc_float(os.path.join(out, f"{name}.expected.fil"), p, values)
        cases.append({"name": name, "fits": f"{name}.fits", "expected": f"{name}.expected.fil",
                      "nbits": want_nbits, "signed": bool(signed and want_nbits != 32),
                      "fch1": p["fch1"], "foff": p["foff"], "tsamp": p["tsamp"],
                      "tstart": p["tstart"], "nchans": nchan, "nsamples": int(values.shape[0])})

    for nbits in (1, 2, 4, 8):
        case(f"u{nbits}_bytes", nbits=nbits, storage="B", want_nbits=nbits)
        case(f"u{nbits}_bits", nbits=nbits, storage="X", want_nbits=nbits)
        case(f"u{nbits}_scaled", nbits=nbits, storage="B", scaled=True, want_nbits=32)
    case("s8_signed", nbits=8, storage="B", signed=True, want_nbits=8)
    case("s4_signed_scaled", nbits=4, storage="X", signed=True, scaled=True, want_nbits=32)
    case("u2_odd_channels", nbits=2, storage="X", nchan=13, want_nbits=32)  # rows not whole bytes
    case("s16", nbits=16, storage="I", signed=True, want_nbits=16)
    case("u16", nbits=16, storage="I", unsigned16=True, want_nbits=16)
    case("s16_scaled", nbits=16, storage="I", signed=True, scaled=True, want_nbits=32)
    case("f32", nbits=32, storage="E", want_nbits=32)
    case("f32_scaled", nbits=32, storage="E", scaled=True, want_nbits=32)
    case("u8_zero_off", nbits=8, storage="B", zero_off=127.5, want_nbits=32)
    case("u8_ascending", nbits=8, storage="B", ascending=True, want_nbits=8)
    case("u8_nstot", nbits=8, storage="B", nstot=4 * 16 + 5, want_nbits=8)
    case("aabb", nbits=8, storage="B", npol=2, pol_type="AABB", pol_sum="AA+BB", want_nbits=32)
    case("aabbcrci_scaled", nbits=8, storage="B", npol=4, pol_type="AABBCRCI", pol_sum="AA+BB",
         scaled=True, want_nbits=32)
    case("iquv16", nbits=16, storage="I", npol=4, pol_type="IQUV", signed=True, want_nbits=32)
    return cases


def filterbank_cases(out, fil, rng, variants):
    hdr, data = read_sigproc(fil)
    stem = os.path.splitext(os.path.basename(fil))[0]
    nsamp, nchan = data.shape
    nsblk = 256
    nrows = -(-nsamp // nsblk)
    pad = nrows * nsblk - nsamp
    x = np.concatenate([data, np.zeros((pad, nchan))]).astype(np.int64)
    nbits = hdr["nbits"]
    common = dict(nbits=nbits, storage="B", tsamp=hdr["tsamp"], tstart=hdr["tstart"],
                  nstot=nsamp if pad else None, source=hdr.get("source_name", stem))
    stored = x.reshape(nrows, nsblk, 1, nchan)
    cases = []

    def add(name, expected=None, **kw):
        write_psrfits(os.path.join(out, f"{name}.fits"), **common, **kw)
        cases.append({"name": name, "fits": f"{name}.fits", "source": fil,
                      "expected": expected, "nsamples": nsamp, "tstart": hdr["tstart"]})

    # The same samples as stored in the filterbank: no scaling, read packed.
    add(stem, stored=stored, fch1=hdr["fch1"], foff=hdr["foff"])
    if not variants:
        return cases
    # Four products whose AA + BB are the samples; CR and CI are noise the reader must ignore.
    aa = x // 2
    four = np.stack([aa, x - aa, rng.integers(0, 256, x.shape), rng.integers(0, 256, x.shape)],
                    axis=1).reshape(nrows, nsblk, 4, nchan)
    add(f"{stem}_4pol", stored=four, npol=4, pol_type="AABBCRCI", fch1=hdr["fch1"],
        foff=hdr["foff"])
    # Ascending frequency: the same sky, the channels in the opposite order.
    last = hdr["fch1"] + (nchan - 1) * hdr["foff"]
    add(f"{stem}_reversed", stored=stored[..., ::-1], fch1=last, foff=-hdr["foff"])
    # One scale and offset for the whole file (stored per row and channel): the same S/N.
    ones = np.ones((nrows, nchan), np.float32)
    add(f"{stem}_scaled", stored=stored, scl=1.75 * ones, offs=-13.0 * ones, fch1=hdr["fch1"],
        foff=hdr["foff"])
    # Scales and offsets per row and channel (as a recorder that re-levels each row writes).
    scl = rng.uniform(0.5, 2.0, (nrows, nchan)).astype(np.float32)
    offs = rng.uniform(-20, 20, (nrows, nchan)).astype(np.float32)
    values = expected_values(stored, scl, offs, ones, 0.0, "first")[:nsamp]
    exp = f"{stem}_rescaled.expected.fil"
    write_sigproc_float(os.path.join(out, exp), hdr, values)
    add(f"{stem}_rescaled", expected=exp, stored=stored, scl=scl, offs=offs, fch1=hdr["fch1"],
        foff=hdr["foff"])
    return cases


def malformed_cases(out, rng):
    stored = rng.integers(0, 256, (4, 8, 1, 16))
    p = dict(nbits=8, storage="B", fch1=1400.0, foff=-1.0, tsamp=1e-3, tstart=60000.0)
    cases = []

    def add(name, reason, category="format", **kw):
        write_psrfits(os.path.join(out, f"{name}.fits"), **{**p, **kw})
        cases.append({"name": name, "fits": f"{name}.fits", "reason": reason,
                      "category": category})

    add("bad_no_subint", "no SUBINT", stored=stored, no_subint=True)
    add("bad_nbits3", "NBITS = 3", stored=stored, keys={"NBITS": 3})
    add("bad_nsblk0", "NSBLK = 0", stored=stored, keys={"NSBLK": 0})
    add("bad_truncated", "truncated", stored=stored, truncate_rows=2)
    # Fold mode, a samples-per-row count that would overflow a buffer, a channel count the DATA
    # column does not hold, a polarisation count the reader does not sum.
    add("bad_fold", "OBS_MODE = 'PSR'", "unsupported", stored=stored,
        primary_keys={"OBS_MODE": "PSR"})
    add("bad_nsblk_huge", "NSBLK = 1099511627776", stored=stored, keys={"NSBLK": 2**40})
    add("bad_nchan", "the DATA column holds", stored=stored, keys={"NCHAN": 9})
    add("bad_npol3", "NPOL = 3", "unsupported", stored=stored, keys={"NPOL": 3})
    return cases


def main():
    out, fils = sys.argv[1], sys.argv[2:]
    if fils[:1] == ["--data"]:
        data = os.environ.get("WARPBEAM_DATA") or fils[1]
        fils = [os.path.join(data, "filterbank", f) for f in ("burst_28.fil", "parkes_2bit.fil")]
        fils = fils if all(os.path.exists(f) for f in fils) else []
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240514)
    manifest = {"synthetic": synthetic_cases(out, rng), "filterbank": [],
                "malformed": malformed_cases(out, rng), "with_data": bool(fils)}
    for i, fil in enumerate(fils):
        manifest["filterbank"] += filterbank_cases(out, fil, rng, variants=i == 0)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
