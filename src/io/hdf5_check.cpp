// HDF5 structure check before libhdf5 (see hdf5_check.hpp for why and the specification's
// sections). Every address and length read here is checked against the file's size before it is
// used; the walk reads only small metadata blocks, each at most kMaxBlock bytes.
#include "io/hdf5_check.hpp"

#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "warpbeam/format.hpp"

namespace warpbeam::io::detail {

namespace {

constexpr std::uint64_t kMaxBlock = 64ull << 20;       // a metadata block (header chunk, heap)
constexpr std::uint64_t kMaxChunkData = 256ull << 20;  // a dataset chunk libhdf5 buffers whole
constexpr long kMaxVisits = 100000;
constexpr int kMaxBtreeLevel = 64;

enum class Kind { object_header, header_chunk, btree, symbol_node, local_heap };

class Walker {
 public:
  Walker(const std::string& path, std::int64_t file_bytes)
      : path_(path), size_(static_cast<std::uint64_t>(file_bytes)) {
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) fail(ErrorCategory::io, "{}: cannot open", path);
  }

  void run() {
    read_superblock();
    while (!headers_.empty()) {
      const std::uint64_t a = headers_.back();
      headers_.pop_back();
      object_header(a);
    }
  }

 private:
  // A view of bytes read from the file; every read past its end is a corrupt file.
  struct Cursor {
    const Walker* w;
    const std::vector<std::uint8_t>& b;
    std::size_t i = 0;
    const char* what;
    std::uint64_t u(int n) {
      if (n < 0 || i + static_cast<std::size_t>(n) > b.size())
        w->bad("{} ends inside a field", what);
      std::uint64_t v = 0;
      for (int k = 0; k < n; ++k)
        v |= static_cast<std::uint64_t>(b[i + static_cast<std::size_t>(k)]) << (8 * k);
      i += static_cast<std::size_t>(n);
      return v;
    }
    void skip(std::uint64_t n) {
      if (n > b.size() - i) w->bad("{} ends inside a field", what);
      i += static_cast<std::size_t>(n);
    }
    std::size_t left() const { return b.size() - i; }
  };

  template <class... A>
  [[noreturn]] void bad(fmt::format_string<A...> f, A&&... a) const {
    fail(ErrorCategory::format, "{}: corrupt HDF5 file: {}", path_,
         fmt::format(f, std::forward<A>(a)...));
  }

  bool undefined(std::uint64_t a) const { return a == undef_; }

  // The absolute offset of [addr, addr + len) (addr relative to the base address), or bad().
  std::uint64_t range(std::uint64_t addr, std::uint64_t len, const char* what) const {
    if (undefined(addr)) bad("{} has no address", what);
    if (addr > size_ || base_ > size_ - addr || len > size_ - base_ - addr)
      bad("{} at {} of {} bytes runs past the end of the file ({} bytes)", what, addr, len, size_);
    return base_ + addr;
  }

  std::vector<std::uint8_t> read(std::uint64_t abs, std::uint64_t len, const char* what) const {
    if (len > kMaxBlock) bad("{} of {} bytes is larger than any HDF5 metadata block", what, len);
    std::vector<std::uint8_t> v(static_cast<std::size_t>(len));
    if (fseeko(file_.get(), static_cast<off_t>(abs), SEEK_SET) != 0 ||
        (len && std::fread(v.data(), 1, v.size(), file_.get()) != v.size()))
      fail(ErrorCategory::io, "{}: read error at byte {}", path_, abs);
    return v;
  }

  // Reads up to `len` bytes of the block at `addr` (fewer where the file ends first).
  std::vector<std::uint8_t> read_prefix(std::uint64_t addr, std::uint64_t len,
                                        const char* what) const {
    const std::uint64_t abs = range(addr, 1, what);
    return read(abs, std::min(len, size_ - abs), what);
  }

  bool first_visit(Kind k, std::uint64_t addr) {
    if (!seen_.insert({k, addr}).second) return false;
    if (++visits_ > kMaxVisits) bad("more than {} metadata blocks", kMaxVisits);
    return true;
  }

  void read_superblock() {
    static const std::uint8_t sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    std::uint64_t at = 0;
    for (;;) {
      if (at + 8 > size_) bad("no superblock signature");
      const auto s = read(at, 8, "signature");
      if (std::memcmp(s.data(), sig, 8) == 0) break;
      at = at ? at * 2 : 512;  // the signature is at 0, 512, 1024, 2048, ... (§II.A)
    }
    const auto b = read(at, std::min<std::uint64_t>(160, size_ - at), "superblock");
    Cursor c{this, b, 8, "the superblock"};
    const auto version = c.u(1);
    std::uint64_t root = 0;
    if (version <= 1) {
      c.skip(4);  // free-space, root group symbol table entry and shared header versions; 0
      offsets(c.u(1), c.u(1));
      c.skip(1);
      leaf_k_ = c.u(2);
      internal_k_ = c.u(2);
      if (leaf_k_ == 0 || internal_k_ == 0) bad("a group B-tree K of 0");
      c.skip(4);                    // file consistency flags
      if (version == 1) c.skip(4);  // indexed storage internal node K, reserved
      base_ = c.u(so_);
      c.skip(3 * static_cast<std::uint64_t>(so_));  // free space, end of file, driver info
      c.skip(so_);                                  // root entry: link name offset
      root = c.u(so_);
      if (c.u(4) == 1) {  // cache type 1: the root group's symbol table, cached in the scratch pad
        c.skip(4);
        const std::uint64_t btree = c.u(so_), heap = c.u(so_);
        symbol_table(btree, heap);
      }
    } else if (version <= 3) {
      offsets(c.u(1), c.u(1));
      c.skip(1);
      base_ = c.u(so_);
      c.skip(2 * static_cast<std::uint64_t>(so_));  // superblock extension, end of file
      root = c.u(so_);
      leaf_k_ = internal_k_ = 0xffff;  // K values live in the superblock extension: not limited
    } else {
      bad("superblock version {}", version);
    }
    if (base_ > size_) bad("base address {} past the end of the file", base_);
    headers_.push_back(root);
  }

  void offsets(std::uint64_t so, std::uint64_t sl) {
    for (std::uint64_t s : {so, sl})
      if (s != 2 && s != 4 && s != 8) bad("offsets or lengths of {} bytes", s);
    so_ = static_cast<int>(so);
    sl_ = static_cast<int>(sl);
    undef_ = so_ == 8 ? ~0ull : (1ull << (8 * so_)) - 1;
  }

  void object_header(std::uint64_t addr) {
    if (!first_visit(Kind::object_header, addr)) return;
    const auto b = read_prefix(addr, 40, "an object header");
    Cursor c{this, b, 0, "an object header"};
    if (b.size() >= 4 && std::memcmp(b.data(), "OHDR", 4) == 0) {
      c.skip(4);
      if (c.u(1) != 2) bad("object header version");
      const auto flags = c.u(1);
      if (flags & 0x20) c.skip(16);  // times
      if (flags & 0x10) c.skip(4);   // attribute phase change values
      const std::uint64_t len = c.u(1 << (flags & 3));
      if (len > kMaxBlock) bad("object header chunk of {} bytes", len);
      const std::uint64_t abs = range(addr + c.i, len + 4, "an object header chunk");
      messages(read(abs, len, "an object header chunk"), 2, (flags & 0x04) != 0);
      for (std::size_t k = 0; k < chunks_.size(); ++k)
        continuation(chunks_[k], 2, flags & 0x04);
    } else {
      if (c.u(1) != 1) bad("object header version");
      c.skip(7);  // reserved, message count, reference count
      const std::uint64_t len = c.u(4);
      const std::uint64_t abs = range(addr + 16, len, "an object header");
      messages(read(abs, len, "an object header"), 1, false);
      for (std::size_t k = 0; k < chunks_.size(); ++k)
        continuation(chunks_[k], 1, false);
    }
    chunks_.clear();
  }

  void continuation(std::pair<std::uint64_t, std::uint64_t> chunk, int version, bool order) {
    if (!first_visit(Kind::header_chunk, chunk.first)) return;
    const std::uint64_t abs = range(chunk.first, chunk.second, "a continuation chunk");
    auto b = read(abs, chunk.second, "a continuation chunk");
    if (version == 2) {
      if (b.size() < 8 || std::memcmp(b.data(), "OCHK", 4) != 0)
        bad("a continuation chunk without its signature");
      b = std::vector<std::uint8_t>(b.begin() + 4, b.end() - 4);
    }
    messages(b, version, order);
  }

  // The messages of one object header chunk (§IV.A.1.a: 8-byte aligned; §IV.A.1.b).
  void messages(const std::vector<std::uint8_t>& b, int version, bool order) {
    Cursor c{this, b, 0, "an object header message"};
    const std::size_t head = version == 1 ? 8 : (order ? 6 : 4);
    while (c.left() >= head) {
      const auto type = version == 1 ? c.u(2) : c.u(1);
      const std::uint64_t size = c.u(2);
      c.skip(version == 1 ? 4 : (order ? 3 : 1));
      if (size > c.left()) bad("a message of {} bytes runs past its header chunk", size);
      std::vector<std::uint8_t> m(b.begin() + static_cast<std::ptrdiff_t>(c.i),
                                  b.begin() + static_cast<std::ptrdiff_t>(c.i + size));
      c.skip(size);
      message(type, m);
    }
  }

  void message(std::uint64_t type, const std::vector<std::uint8_t>& m) {
    Cursor c{this, m, 0, "an object header message"};
    switch (type) {
      case 0x0010: {  // continuation: offset, length
        const std::uint64_t off = c.u(so_), len = c.u(sl_);
        range(off, len, "a continuation chunk");
        if (len > kMaxBlock) bad("a continuation chunk of {} bytes", len);
        chunks_.emplace_back(off, len);
        break;
      }
      case 0x0011: {  // symbol table: v1 B-tree, local heap
        const std::uint64_t btree = c.u(so_), heap = c.u(so_);
        symbol_table(btree, heap);
        break;
      }
      case 0x0006:  // link
        link(c);
        break;
      case 0x0002: {  // link info: dense storage (fractal heap, v2 B-trees) is checked, not walked
        c.skip(1);
        const auto flags = c.u(1);
        if (flags & 1) c.skip(8);
        for (int k = 0; k < ((flags & 2) ? 3 : 2); ++k) {
          const std::uint64_t a = c.u(so_);
          if (!undefined(a)) range(a, 1, "a link index");
        }
        break;
      }
      case 0x0004: {  // fill value (old): size, value
        if (c.u(4) > c.left()) bad("a fill value longer than its message");
        break;
      }
      case 0x0005:  // fill value
        fill_value(c);
        break;
      case 0x0008:  // data layout
        layout(c);
        break;
      default:
        break;
    }
  }

  void link(Cursor& c) {
    if (c.u(1) != 1) bad("link message version");
    const auto flags = c.u(1);
    const std::uint64_t kind = (flags & 0x08) ? c.u(1) : 0;
    if (flags & 0x04) c.skip(8);
    if (flags & 0x10) c.skip(1);
    c.skip(c.u(1 << (flags & 3)));                // the name
    if (kind == 0) headers_.push_back(c.u(so_));  // a hard link: the object's header
  }

  void fill_value(Cursor& c) {
    const auto version = c.u(1);
    bool present = false;
    if (version == 1 || version == 2) {
      c.skip(2);  // allocation and write times
      present = c.u(1) != 0 || version == 1;
    } else {
      present = (c.u(1) & 0x20) != 0;
    }
    if (present && c.left() >= 4 && c.u(4) > c.left()) bad("a fill value longer than its message");
  }

  // §IV.A.2.i; chunked layouts of versions 1-3 index their chunks with a v1 B-tree (type 1).
  void layout(Cursor& c) {
    const auto version = c.u(1);
    std::uint64_t cls = 0, rank = 0, address = undef_;
    std::vector<std::uint64_t> dims;
    if (version == 1 || version == 2) {
      rank = c.u(1);
      cls = c.u(1);
      c.skip(5);
      if (cls != 0) address = c.u(so_);
      for (std::uint64_t k = 0; k < rank; ++k)
        dims.push_back(c.u(4));
      if (cls == 2) dims.push_back(c.u(4));  // the element size
    } else if (version == 3) {
      cls = c.u(1);
      if (cls == 0) {
        if (c.u(2) > c.left()) bad("compact data longer than its message");
        return;
      }
      if (cls == 1) {
        const std::uint64_t a = c.u(so_), n = c.u(sl_);
        if (!undefined(a)) range(a, n, "a dataset's contiguous data");
        return;
      }
      if (cls != 2) return;
      rank = c.u(1);
      address = c.u(so_);
      for (std::uint64_t k = 0; k < rank; ++k)
        dims.push_back(c.u(4));
    } else {
      return;  // version 4: chunk indexes with checksums, not walked
    }
    if (cls != 2 || dims.empty()) return;
    std::uint64_t bytes = 1;
    for (std::uint64_t d : dims) {
      if (d == 0) bad("a chunk dimension of 0");
      if (d > kMaxChunkData / bytes) bad("a dataset chunk over {} bytes", kMaxChunkData);
      bytes *= d;
    }
    // Versions 1 and 2 (HDF5 < 1.6.3) list the element size apart from the dimensions: their
    // chunk B-trees are left to libhdf5.
    if (version == 3 && !undefined(address)) chunk_btree(address, dims.size(), -1);
  }

  void symbol_table(std::uint64_t btree, std::uint64_t heap) {
    if (first_visit(Kind::local_heap, heap)) {
      const auto b =
          read_prefix(heap, 8 + 2 * static_cast<std::uint64_t>(sl_) + so_, "a local heap");
      Cursor c{this, b, 0, "a local heap"};
      if (b.size() < 4 || std::memcmp(b.data(), "HEAP", 4) != 0) bad("a local heap's signature");
      c.skip(8);  // signature, version, reserved
      const std::uint64_t size = c.u(sl_);
      c.skip(sl_);
      const std::uint64_t data = c.u(so_);
      if (size > kMaxBlock) bad("a local heap of {} bytes", size);
      range(data, size, "a local heap's data");
    }
    group_btree(btree, -1);
  }

  // A B-tree node (§III.A.1): its header (signature, type, level, entries, siblings) checked —
  // the type, the level one less than its parent's, at most `max_entries` entries — then its
  // keys and children read: returns (level, entries) and leaves `body` holding key, child, ...,
  // key, each key `key_bytes` long.
  std::pair<int, std::uint64_t> btree_node(std::uint64_t addr, std::uint64_t type, int parent_level,
                                           std::uint64_t max_entries, std::uint64_t key_bytes,
                                           std::vector<std::uint8_t>& body) {
    const std::uint64_t head = 8 + 2 * static_cast<std::uint64_t>(so_);
    const auto b = read(range(addr, head, "a B-tree node"), head, "a B-tree node");
    Cursor c{this, b, 0, "a B-tree node"};
    if (std::memcmp(b.data(), "TREE", 4) != 0) bad("a B-tree's signature");
    c.skip(4);
    if (c.u(1) != type) bad("a B-tree node of another type");
    const int level = static_cast<int>(c.u(1));
    if (level > kMaxBtreeLevel || (parent_level >= 0 && level != parent_level - 1))
      bad("a B-tree node at level {}", level);
    const std::uint64_t entries = c.u(2);
    if (entries > max_entries) bad("a B-tree node with {} entries", entries);
    const std::uint64_t len = entries * (key_bytes + so_) + key_bytes;
    body = read(range(addr + head, len, "a B-tree node"), len, "a B-tree node");
    return {level, entries};
  }

  void group_btree(std::uint64_t addr, int parent_level) {
    if (!first_visit(Kind::btree, addr)) return;
    std::vector<std::uint8_t> b;
    const auto [level, entries] =
        btree_node(addr, 0, parent_level, 2 * internal_k_, static_cast<std::uint64_t>(sl_), b);
    Cursor c{this, b, 0, "a group B-tree"};
    for (std::uint64_t k = 0; k < entries; ++k) {
      c.skip(sl_);  // key: a heap offset
      const std::uint64_t child = c.u(so_);
      if (level > 0)
        group_btree(child, level);
      else
        symbol_node(child);
    }
  }

  void symbol_node(std::uint64_t addr) {
    if (!first_visit(Kind::symbol_node, addr)) return;
    const std::uint64_t entry = 2 * static_cast<std::uint64_t>(so_) + 24;
    const auto h = read(range(addr, 8, "a symbol table node"), 8, "a symbol table node");
    if (std::memcmp(h.data(), "SNOD", 4) != 0) bad("a symbol table node's signature");
    const std::uint64_t n = h[6] | static_cast<std::uint64_t>(h[7]) << 8;
    if (n > 2 * leaf_k_) bad("a symbol table node with {} entries", n);
    const auto b =
        read(range(addr + 8, n * entry, "a symbol table node"), n * entry, "a symbol table node");
    Cursor c{this, b, 0, "a symbol table node"};
    for (std::uint64_t k = 0; k < n; ++k) {
      c.skip(so_);  // link name offset
      headers_.push_back(c.u(so_));
      const auto cache = c.u(4);
      c.skip(4);
      if (cache == 1) {
        const std::uint64_t btree = c.u(so_), heap = c.u(so_);
        c.skip(16 - 2 * static_cast<std::uint64_t>(so_));
        symbol_table(btree, heap);
      } else {
        c.skip(16);
      }
    }
  }

  // A chunked dataset's B-tree (type 1): keys are (chunk size, filter mask, `ndims` offsets).
  void chunk_btree(std::uint64_t addr, std::size_t ndims, int parent_level) {
    if (!first_visit(Kind::btree, addr)) return;
    std::vector<std::uint8_t> b;
    const std::uint64_t key = 8 + 8 * static_cast<std::uint64_t>(ndims);
    const auto [level, entries] = btree_node(addr, 1, parent_level, 65535, key, b);
    Cursor c{this, b, 0, "a chunk B-tree"};
    for (std::uint64_t k = 0; k < entries; ++k) {
      const std::uint64_t bytes = c.u(4);
      c.skip(key - 4);
      const std::uint64_t child = c.u(so_);
      if (level > 0) {
        chunk_btree(child, ndims, level);
      } else {
        if (bytes > kMaxChunkData) bad("a stored chunk of {} bytes", bytes);
        range(child, bytes, "a dataset chunk");
      }
    }
  }

  std::string path_;
  std::uint64_t size_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, std::fclose};
  int so_ = 8, sl_ = 8;
  std::uint64_t undef_ = ~0ull, base_ = 0, leaf_k_ = 4, internal_k_ = 16;
  std::vector<std::uint64_t> headers_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks_;
  std::set<std::pair<Kind, std::uint64_t>> seen_;
  long visits_ = 0;
};

}  // namespace

void check_hdf5_structure(const std::string& path, std::int64_t file_bytes) {
  Walker(path, file_bytes).run();
}

}  // namespace warpbeam::io::detail
