#pragma once
// Structure check of an HDF5 file before libhdf5 opens it (internal to the library).
//
// libhdf5 1.10 (Debian 12) sizes some of its metadata buffers from lengths read from the file and
// allocates them before it reads (or checks) the bytes: an object header's continuation chunk
// (H5O_protect -> H5C_protect: malloc of the continuation message's 8-byte length), a local
// heap's data block, a fill value, a dataset's chunk. A 23 kB UFF file can so make `das` ask for
// 8 GiB (issue 18: fuzz_uff's long run). check_hdf5_structure() walks the file's metadata from the
// superblock — every object header reachable from the root group through symbol tables and hard
// links — and refuses any length or address that runs past the end of the file, before libhdf5
// sees it.
//
// Format: HDF5 File Format Specification, version 3.0 (The HDF Group): the superblock (§II.A,
// versions 0-3), version 1 B-trees (§III.A.1), group symbol table nodes (§III.B), local heaps
// (§III.D), version 1 and 2 object headers (§IV.A.1.a, §IV.A.1.b) and their messages: link
// (§IV.A.2.g), fill value (§IV.A.2.e, §IV.A.2.f), data layout (§IV.A.2.i), continuation
// (§IV.A.2.q), symbol table (§IV.A.2.r). What it does not walk (dense link storage in fractal
// heaps, version 2 B-trees, version 4 layouts' chunk indexes, attributes) is either checksummed in
// the format or not read by warpbeam's readers; addresses it finds there are still checked against
// the file.
#include <cstdint>
#include <string>

namespace warpbeam::io::detail {

/// Throws Error(format) naming `path` and what is wrong ("corrupt HDF5 file: ..."); Error(io)
/// when the file cannot be read. `file_bytes` is the file's size. Visits at most 100,000 metadata
/// blocks (a larger tree is refused as corrupt: warpbeam's UFF files hold a few dozen).
void check_hdf5_structure(const std::string& path, std::int64_t file_bytes);

}  // namespace warpbeam::io::detail
