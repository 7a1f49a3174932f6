// The one output rule (warpbeam/io/output_file.hpp), in the library and through the CLI: issue
// 18's B1 (devices, FIFOs and symbolic links), B2 (an output that is an input) and B3 (a folder
// as the output; a failed second product deleting the first's existing file).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/sim/filterbank.hpp"

using namespace warpbeam;
namespace fs = std::filesystem;

namespace {

void put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The message of the Error(io) that `f` throws ("" when it throws nothing or something else).
template <class F>
std::string io_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.category() == ErrorCategory::io ? e.what()
                                             : std::string("wrong category: ") + e.what();
  }
  return {};
}

bool contains(const std::string& s, const std::string& word) {
  return s.find(word) != std::string::npos;
}

std::string small_fil(const wbtest::TempDir& dir) {
  sim::FilterbankSimConfig s;
  s.nchans = 16;
  s.foff_mhz = -8;
  s.duration_s = 1;
  s.bursts = {{50, 20, 1e-3, 0.5}};
  const std::string path = dir.file("small.fil");
  sim::simulate_filterbank(s, path);
  fs::remove(path + ".json");
  return path;
}

}  // namespace

TEST(OutputRule, SymlinkIsFollowedAndItsTargetReplaced) {
  wbtest::TempDir dir;
  fs::create_directory(dir.path / "real");
  put(dir.file("real/t.cand"), "old\n");
  fs::create_symlink("real/t.cand", dir.path / "l.cand");  // relative to the link's folder
  io::write_text_file(dir.file("l.cand"), "new\n");
  EXPECT_TRUE(fs::is_symlink(dir.path / "l.cand")) << "the link was replaced by a file";
  EXPECT_EQ(wbtest::slurp(dir.file("real/t.cand")), "new\n");
  // A dangling link: its target is created.
  fs::create_symlink(dir.path / "real/new.cand", dir.path / "d.cand");
  io::write_text_file(dir.file("d.cand"), "x");
  EXPECT_TRUE(fs::is_symlink(dir.path / "d.cand"));
  EXPECT_EQ(wbtest::slurp(dir.file("real/new.cand")), "x");
  EXPECT_EQ(io::output_target(dir.file("l.cand")), dir.file("real/t.cand"));
  // No temporary file is left in either folder.
  EXPECT_EQ(dir.files().size(), 3u);
}

TEST(OutputRule, SymlinkLoopIsRefused) {
  wbtest::TempDir dir;
  fs::create_symlink("b", dir.path / "a");
  fs::create_symlink("a", dir.path / "b");
  EXPECT_TRUE(
      contains(io_error([&] { io::write_text_file(dir.file("a"), "x"); }), "symbolic links"));
}

TEST(OutputRule, FifoDeviceAndFolderAreRefusedAndLeftAlone) {
  wbtest::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  auto e = io_error([&] { io::write_text_file(dir.file("pipe"), "x"); });
  EXPECT_TRUE(contains(e, "FIFO")) << e;
  EXPECT_EQ(fs::status(dir.path / "pipe").type(), fs::file_type::fifo);
  // A link to the FIFO: the same.
  fs::create_symlink(dir.path / "pipe", dir.path / "lp");
  EXPECT_TRUE(contains(io_error([&] { io::OutputFile f(dir.file("lp")); }), "FIFO"));
  // A device (the test never writes to it: the check comes first).
  e = io_error([&] { io::check_outputs({"/dev/null"}); });
  EXPECT_TRUE(contains(e, "device")) << e;
  EXPECT_EQ(fs::status("/dev/null").type(), fs::file_type::character);
  // A folder.
  fs::create_directory(dir.path / "emptydir");
  e = io_error([&] { io::write_text_file(dir.file("emptydir"), "x"); });
  EXPECT_TRUE(contains(e, "folder")) << e;
  EXPECT_TRUE(fs::is_directory(dir.path / "emptydir"));
  EXPECT_EQ(dir.files().size(), 3u);  // nothing written beside them
}

TEST(OutputRule, MissingFolderAndLongNameAreRefusedBeforeWork) {
  wbtest::TempDir dir;
  auto e = io_error([&] { io::check_outputs({dir.file("no/such/x.cand")}); });
  EXPECT_TRUE(contains(e, "does not exist")) << e;
  { std::ofstream(dir.file("plain")) << "x"; }  // a file where the folder should be
  e = io_error([&] { io::check_outputs({dir.file("plain/x.cand")}); });
  EXPECT_TRUE(contains(e, "plain' is a file, not a folder")) << e;
  e = io_error([&] { io::check_outputs({dir.file(std::string(250, 'x') + ".cand")}); });
  EXPECT_TRUE(contains(e, "too long")) << e;
  EXPECT_TRUE(contains(io_error([&] { io::check_outputs({""}, {}); }), "")) << "empty is skipped";
}

TEST(OutputRule, AnOutputThatIsAnInputIsRefused) {
  wbtest::TempDir dir;
  put(dir.file("in.fil"), "data");
  fs::create_hard_link(dir.path / "in.fil", dir.path / "hard.fil");
  fs::create_symlink("in.fil", dir.path / "soft.fil");
  for (const char* name : {"in.fil", "hard.fil", "soft.fil", "./in.fil"}) {
    const auto out = (dir.path / name).string();
    const auto e = io_error([&] { io::check_outputs({out}, {dir.file("in.fil")}); });
    EXPECT_TRUE(contains(e, "is the input")) << name << ": " << e;
  }
  // Two products in one file.
  const auto e = io_error([&] {
    io::check_outputs({dir.file("a.cand"), dir.file("./a.cand")}, {});
  });
  EXPECT_TRUE(contains(e, "same file")) << e;
  EXPECT_EQ(wbtest::slurp(dir.file("in.fil")), "data");
}

TEST(OutputRule, StagedOutputsRestoreWhatAFailedCommitReplaced) {
  wbtest::TempDir dir;
  put(dir.file("a.cand"), "precious\n");
  {
    io::StagedOutputs staged;
    io::write_text_file(staged.temp(dir.file("a.cand")), "new cand\n");
    io::write_text_file(staged.temp(dir.file("a.json")), "{}\n");
    fs::create_directory(dir.path / "a.json");  // the second target turns into a folder
    EXPECT_TRUE(contains(io_error([&] { staged.commit(); }), "folder"));
  }
  EXPECT_EQ(wbtest::slurp(dir.file("a.cand")), "precious\n") << "the old file was not restored";
  // Only a.cand and the folder: no temporary or backup file is left.
  EXPECT_EQ(dir.files().size(), 2u);
  // A product that did not exist before is removed again.
  fs::remove(dir.path / "a.cand");
  fs::remove(dir.path / "a.json");
  {
    io::StagedOutputs staged;
    io::write_text_file(staged.temp(dir.file("a.cand")), "new cand\n");
    io::write_text_file(staged.temp(dir.file("a.json")), "{}\n");
    fs::create_directory(dir.path / "a.json");
    EXPECT_FALSE(io_error([&] { staged.commit(); }).empty());
  }
  EXPECT_FALSE(fs::exists(dir.path / "a.cand"));
  // And a commit that works replaces both.
  fs::remove(dir.path / "a.json");
  put(dir.file("a.cand"), "old\n");
  io::StagedOutputs staged;
  io::write_text_file(staged.temp(dir.file("a.cand")), "new\n");
  io::write_text_file(staged.temp(dir.file("a.json")), "{}\n");
  staged.commit();
  EXPECT_EQ(wbtest::slurp(dir.file("a.cand")), "new\n");
  EXPECT_EQ(dir.files().size(), 2u);
}

// B2: `search same.fil --output same.fil` replaced the filterbank by a .cand and exited 0.
TEST(OutputRuleCli, SearchRefusesToOverwriteItsInput) {
  wbtest::TempDir dir;
  const auto fil = small_fil(dir);
  const auto before = wbtest::slurp(fil);
  fs::create_symlink(fil, dir.path / "link.cand");
  for (const std::string out : {fil, dir.file("link.cand")}) {
    const auto r = wbtest::run_cli("search '" + fil + "' --dm-max 60 --output '" + out + "'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "is the input")) << r.err;
  }
  const auto r = wbtest::run_cli("search '" + fil + "' --dm-max 60 --json '" + fil + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(wbtest::slurp(fil), before) << "the input was overwritten";
}

// B1 and B3 through the CLI: a folder, a FIFO and a symbolic link as --output; a --json that
// fails after the search must not delete an existing .cand.
TEST(OutputRuleCli, SearchOutputsFollowTheRule) {
  wbtest::TempDir dir;
  const auto fil = small_fil(dir);
  fs::create_directory(dir.path / "emptydir");
  auto r =
      wbtest::run_cli("search '" + fil + "' --dm-max 60 --output '" + dir.file("emptydir") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "is a folder")) << r.err;
  EXPECT_EQ(r.out, "") << "the search ran before the output was checked";
  EXPECT_TRUE(fs::is_directory(dir.path / "emptydir")) << "the folder was deleted";

  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  r = wbtest::run_cli("search '" + fil + "' --dm-max 60 --output '" + dir.file("pipe") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(fs::status(dir.path / "pipe").type(), fs::file_type::fifo);

  // A device, named as one: the CLI writes field names as flags, and "a device:" once read
  // "a --device:" (a new user's try of 2026-12-02).
  r = wbtest::run_cli("search '" + fil + "' --dm-max 60 --output /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "is a device file")) << r.err;
  EXPECT_FALSE(contains(r.err, "--device")) << r.err;

  fs::create_directory(dir.path / "real");
  fs::create_symlink("real/t.cand", dir.path / "l.cand");
  r = wbtest::run_cli("search '" + fil + "' --dm-max 60 --output '" + dir.file("l.cand") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir.path / "l.cand"));
  EXPECT_TRUE(fs::is_regular_file(dir.path / "real/t.cand"));

  put(dir.file("keep.cand"), "precious\n");
  const std::string long_json = dir.file(std::string(240, 'j') + ".json");
  r = wbtest::run_cli("search '" + fil + "' --dm-max 60 --output '" + dir.file("keep.cand") +
                      "' --json '" + long_json + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(wbtest::slurp(dir.file("keep.cand")), "precious\n") << "a failed --json deleted it";
}

// das --out, --npy and the JSON follow the same rule (B1 for das): a FIFO is refused before the
// channel data are read, and the input cannot be the output.
TEST(OutputRuleCli, DasAndSimulateCheckOutputsFirst) {
  wbtest::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("o.png").c_str(), 0600), 0);
  auto r =
      wbtest::run_cli("das '" + dir.file("missing.mat") +
                      "' --grid=-1e-3:1e-3:5e-4,1e-3:3e-3:5e-4 --out '" + dir.file("o.png") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "FIFO")) << r.err;  // the output is checked before the input is read
  fs::create_directory(dir.path / "f.fil");
  r = wbtest::run_cli("simulate filterbank '" + dir.file("f.fil") + "' --duration 0.1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "folder")) << r.err;
  EXPECT_TRUE(fs::is_directory(dir.path / "f.fil"));
  r = wbtest::run_cli("bench dedisp --json '" + dir.file("o.png") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "FIFO")) << r.err;
}
