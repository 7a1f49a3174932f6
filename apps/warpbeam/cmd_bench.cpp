// `warpbeam bench ENGINE --config NAME`: the benchmarks' options; each callback hands them to
// its driver in bench/ (bench/drivers.hpp), which builds the reference configuration, times it
// and writes the record.
#include <memory>
#include <string>

#include "bench/drivers.hpp"
#include "commands.hpp"

namespace warpbeam::cli {

void add_bench_ceilings_command(CLI::App& app) {
  auto* bench = app.get_subcommand("bench");
  auto* cmd =
      bench->add_subcommand("ceilings", "Measure the device's copy bandwidth and fp32 rates");
  auto json = std::make_shared<std::string>();
  cmd->add_option("--json", *json, "Write the record as JSON to this file");
  cmd->callback([json] {
    io::check_outputs({*json});  // before the work: output_file.hpp's rule
    bench::bench_ceilings(*json);
  });
}

void add_bench_beamform_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "beamform", "Benchmark the beamformer on B1 (BEST-2) or B2 (large N)");
  auto o = std::make_shared<bench::BeamformBenchOptions>();
  cmd->add_option("--config", o->config, "B1 or B2 (DESIGN.md)")
      ->check(CLI::IsMember({"B1", "B2"}))
      ->capture_default_str();
  add_backend_option(*cmd, o->backend);
  cmd->add_option(
         "--algorithm", o->algorithm,
         "auto (every measured candidate), register-tiled, register-stream, "
         "tensor-core, cublas-fp16, tensor-int8 or tensor-int8-stream (those two: that one, "
         "and the round-1 baseline)")
      ->check(CLI::IsMember({"auto", "register-tiled", "register-stream", "tensor-core",
                             "cublas-fp16", "tensor-int8", "tensor-int8-stream"}))
      ->capture_default_str();
  cmd->add_flag("--sweep", o->sweep,
                "Try every tuning of every candidate (each verified); report the fastest");
  cmd->add_option("--repeats", o->repeats, "Timed repeats (default 10 on CUDA, 3 on the CPU)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", o->json, "Write the record as JSON to this file");
  cmd->callback([o] {
    io::check_outputs({o->json});
    bench::bench_beamform(*o);
  });
}

void add_bench_das_command(CLI::App& app) {
  auto* bench = app.get_subcommand("bench");
  auto* cmd = bench->add_subcommand("das", "Delay-and-sum variants on U1 or U2 (points/s)");
  auto o = std::make_shared<bench::DasBenchOptions>();
  cmd->add_option("--config", o->config, "Reference configuration: U1 or U2")
      ->check(CLI::IsMember({"U1", "U2"}))
      ->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm,
                  "Only this variant (bl, bi, tc, tcw) besides the BL baseline; default: all");
  cmd->add_option("--storage", o->storage, "Storage of --algorithm: fp32 or fp16")
      ->check(CLI::IsMember({"fp32", "fp16"}))
      ->capture_default_str();
  cmd->add_flag("--sweep", o->sweep, "Try the tile sizes of each variant and report the best");
  cmd->add_option("--repeats", o->repeats, "Timed repeats")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Override the batch (frames)")->check(CLI::Range(1, 4096));
  cmd->add_option("--rx-split", o->rx_split,
                  "tcw without --sweep: warps sharing one tile's receivers (1, 2, 4 or 8)")
      ->check(CLI::IsMember({1, 2, 4, 8}));
  cmd->add_option("--json", o->json, "Write the record as JSON to this file");
  add_backend_option(*cmd, o->backend);
  cmd->callback([o] {
    io::check_outputs({o->json});
    bench::bench_das(*o);
  });
}

void add_bench_epic_command(CLI::App& app) {
  auto o = std::make_shared<bench::EpicBenchOptions>();
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "epic", "EPIC imager on E1 (128^2), E2 (64^2) or E3 (256^2): time per 40 ms gulp");
  cmd->add_option("--config", o->config, "E1, E2 or E3")->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm, "all, multikernel, fused (CUDA) or reference")
      ->capture_default_str();
  cmd->add_flag("--sweep", o->sweep, "Also time the fused kernel's tunables and report the best");
  cmd->add_option("--repeats", o->repeats, "Timed runs after a warm-up")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--ntime", o->ntime, "Spectra per gulp (default 1000; CPU: 10)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
  cmd->add_option("--ssmif", o->ssmif, "Station file for the stand layout");
  cmd->add_option("--json", o->json, "Write the record as JSON to this file");
  o->backend = "cuda";
  add_backend_option(*cmd, o->backend);
  cmd->callback([o] {
    io::check_outputs({o->json});
    bench::bench_epic(*o);
  });
}

void add_bench_dedisp_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "dedisp", "Dedispersion throughput and real-time factor on a reference configuration");
  auto req = std::make_shared<bench::DedispBenchRequest>();
  auto no_sweep = std::make_shared<bool>(false);
  cmd->add_option("--config", req->config, "Reference configuration (DESIGN.md)")
      ->check(CLI::IsMember({"D1"}))
      ->capture_default_str();
  add_backend_option(*cmd, req->backend);
  cmd->add_option("--nsamples", req->nsamples,
                  "Output samples to time (default: the whole configuration)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd->add_option("--gulp", req->gulp, "Output samples per execute() (default: backend's)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  cmd->add_option("--repeats", req->repeats, "Timed repeats")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--threads", req->threads, "CPU threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--no-sweep", *no_sweep, "Skip the sweep of tile sizes (CPU)");
  cmd->add_flag("--sweep", req->cuda_sweep,
                "CUDA: time 10 tile sizes of each tiled kernel (the CPU's sweep runs unless "
                "--no-sweep)");
  cmd->add_flag("--autotune", req->autotune,
                "CUDA: run autotune() (cached per shape in $XDG_CACHE_HOME/warpbeam) and time its "
                "pick");
  cmd->add_option("--algorithm", req->algorithm,
                  "CUDA: kernels besides the direct baseline: all (tiled and packed), tiled, "
                  "packed, auto, direct")
      ->check(CLI::IsMember({"all", "auto", "automatic", "direct", "tiled", "packed"}))
      ->capture_default_str();
  cmd->add_flag(
      "--no-file", [req](std::int64_t) { req->end_to_end = false; },
      "CUDA: skip the end-to-end run from a file");
  cmd->add_option("--json", req->json, "Write the record as JSON to this file");
  cmd->callback([req, no_sweep] {
    io::check_outputs({req->json});
    req->sweep = !*no_sweep;
    bench::bench_dedisp(*req);
  });
}

void add_bench_search_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "search", "The file search end to end on a simulated D1 file with a burst");
  auto o = std::make_shared<bench::SearchBenchOptions>();
  cmd->add_option("--config", o->config, "Reference configuration (DESIGN.md)")
      ->check(CLI::IsMember({"D1"}))
      ->capture_default_str();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--nsamples", o->nsamples, "Input samples of the file (default: D1's 2^20)")
      ->check(CLI::Range(std::int64_t{1} << 17, std::int64_t{1} << 26));
  cmd->add_option("--repeats", o->repeats, "Timed searches of the file")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--autotune", o->autotune, "CUDA: autotune the dedispersion kernel first");
  cmd->add_option("--read-threads", o->read_threads,
                  "Threads per read of a gulp, as search --read-threads (0: automatic)")
      ->check(CLI::Range(0, 64));
  cmd->add_flag("--read-only", o->read_only,
                "Only measure reading (and, cpu, unpacking) the file's gulps: one thread "
                "against --read-threads, alternately");
  cmd->add_option("--dedisp", o->dedisp,
                  "Dedispersion method, as search --dedisp: brute, subband, fdmt or auto")
      ->check(CLI::IsMember({"auto", "brute", "subband", "fdmt"}))
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write the record as JSON to this file");
  cmd->callback([o] {
    io::check_outputs({o->json_path});
    bench::bench_search(*o);
  });
}

void add_bench_search_scaling_command(CLI::App& app) {
  auto o = std::make_shared<bench::SearchScalingOptions>();
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "search-scaling", "Scaling of the D1 search from one GPU to all (issue 7)");
  cmd->add_option("--config", o->config, "Reference configuration (D1)")->capture_default_str();
  cmd->add_option("--backend", o->backend, "cuda, or cpu (the search part, --workers workers)")
      ->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "Devices of the 'all' run (default: every visible one)");
  cmd->add_option("--workers", o->workers, "CPU backend: workers of the 'all' run")
      ->capture_default_str();
  cmd->add_option("--file-samples", o->file_samples,
                  "Samples of the simulated file of the search part")
      ->capture_default_str();
  cmd->add_option("--files", o->files,
                  "Simulated files (beams) of the search part: 1 splits its DM trials over the "
                  "workers, as many as the workers go whole to them")
      ->capture_default_str();
  cmd->add_option("--dm-max", o->dm_max, "Largest DM of the search part (D1: 1000)")
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed repeats of the kernel part")
      ->capture_default_str();
  cmd->add_flag("--no-kernel", o->no_kernel, "Skip the dedispersion kernel part");
  cmd->add_flag("--no-search", o->no_search, "Skip the end-to-end search part");
  cmd->add_option("--json", o->json, "Write the record as JSON to this file");
  cmd->callback([o] {
    io::check_outputs({o->json});
    bench::bench_search_scaling(*o);
  });
}

void add_bench_pipeline_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "pipeline", "Benchmark voltages -> beams -> search on B1 (BEST-2), voltages from memory");
  auto o = std::make_shared<bench::PipelineBenchOptions>();
  cmd->add_option("--config", o->config, "B1 (DESIGN.md)")
      ->check(CLI::IsMember({"B1"}))
      ->capture_default_str();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--seconds", o->seconds, "Seconds of voltages (default 16 on cuda, 2 on cpu)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--dm-max", o->dm_max, "Largest DM searched (pc cm^-3)")
      ->check(CLI::Range(0.0, 5000.0))
      ->capture_default_str();
  cmd->add_option("--integrate", o->integrate, "Voltage samples per beam sample")
      ->check(CLI::Range(1, 8192))
      ->capture_default_str();
  cmd->add_option("--beams", o->beams, "Beams formed and searched")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "CUDA: devices sharing the work, e.g. 0,1")->delimiter(',');
  cmd->add_option("--split", o->split, "Several devices: auto, channels or beams")
      ->check(CLI::IsMember({"auto", "channels", "beams"}))
      ->capture_default_str();
  cmd->add_flag("--scaling", o->scaling,
                "CUDA: also run on the first of --gpus alone and with the other split; report "
                "speedups and scaling efficiency (no --gpus: every visible device, or two "
                "workers sharing a single one)");
  cmd->add_flag("--pageable", o->pageable,
                "CUDA: feed pageable voltage blocks (staged per device) instead of pinned ones");
  cmd->add_flag("--int8-weights", o->int8_weights,
                "Let the beamformer's automatic choice use int8 weights (as pipeline "
                "--int8-weights)");
  cmd->add_option("--json", o->json, "Write the record as JSON to this file");
  cmd->callback([o] {
    io::check_outputs({o->json});
    bench::bench_pipeline(*o);
  });
}

}  // namespace warpbeam::cli
