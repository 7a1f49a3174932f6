#!/usr/bin/env python3
"""A TBX frame decoder written from the format (LSL's lsl/reader/tbx.py and tbx.cpp, read as the
reference), independent of warpbeam's reader, for test_lwa: prints JSON with every whole frame's
header and, per frame and channel, integer checksums of its payload.

    lwa_tbx_decode.py FILE

Frame: big-endian sync word 0xDEC0DE5C, id (top byte) + frame count (24 bits), second count,
first_chan (uint32), nstand (uint16), nchan (uint16), time tag (int64); then nchan x nstand x 2
bytes, each a 4+4-bit two's-complement complex sample with the real part in the high nibble.
"""

import json
import struct
import sys


def nibble(v):
    return v - 16 if v >= 8 else v


def main():
    blob = open(sys.argv[1], "rb").read()
    frames, pos = [], 0
    while pos + 28 <= len(blob):
        sync, word, sec, first, nstand, nchan, tag = struct.unpack_from(">IIIIHHq", blob, pos)
        size = 28 + 2 * nchan * nstand
        if pos + size > len(blob):
            break
        payload = blob[pos + 28:pos + size]
        chans = []
        for k in range(nchan):
            row = payload[k * 2 * nstand:(k + 1) * 2 * nstand]  # [stand][pol]
            re = [nibble(b >> 4) for b in row]
            im = [nibble(b & 15) for b in row]
            chans.append({"sum_re": sum(re), "sum_im": sum(im),
                          "power": sum(r * r + i * i for r, i in zip(re, im)),
                          "weighted": sum((j + 1) * (r + 3 * i) for j, (r, i) in
                                          enumerate(zip(re, im)))})
        frames.append({"sync": sync, "id": word >> 24, "frame_count": word & 0xFFFFFF,
                       "second_count": sec, "first_chan": first, "nstand": nstand,
                       "nchan": nchan, "time_tag": tag, "channels": chans})
        pos += size
    print(json.dumps({"frames": frames, "trailing_bytes": len(blob) - pos}))


if __name__ == "__main__":
    main()
