#pragma once
// Structure check of a MATLAB level-5 MAT-file before matio reads it (internal to the library).
//
// matio sizes its buffers from what a file declares while it reads a variable's header: a
// 1,800-byte file made it take 21 GB, a struct's declared dims 4 GB in Mat_VarReadInfo, and a
// field table without names crashed it (issue 18). check_mat5_structure() walks every data
// element of the file first, inflating compressed ones as a stream without keeping them, and
// refuses a file whose declared sizes its bytes cannot back: dims whose product overflows, an
// array whose data element holds fewer bytes than its dims need, a struct or cell with more
// fields than bytes, nesting deeper than 32, classes warpbeam does not read (sparse, objects,
// function handles, opaque), elements running past their parent or the file. What passes, matio
// can read with allocations bounded by the file's (inflated) bytes.
//
// Format: MathWorks, "MAT-File Format" (matfile_format.pdf), level 5: a 128-byte header, then
// data elements (8-byte tag: type and byte count, or the 4-byte "small data element" form),
// miMATRIX (14) holding array flags, dimensions, name and data sub-elements padded to 8 bytes,
// and miCOMPRESSED (15) holding one zlib-compressed element.
#include <cstdint>
#include <string>

namespace warpbeam::io::detail {

/// Throws Error(format) naming `path` and the problem; Error(io) when the file cannot be read.
/// `file_bytes` is the file's size. Only for level-5 files (the header checked by the caller).
void check_mat5_structure(const std::string& path, std::int64_t file_bytes);

}  // namespace warpbeam::io::detail
