#pragma once
// The multi-beam transient pipeline: channelised antenna voltages -> beams (detected power summed
// over the polarisations) -> RFI cleaning -> dedispersion -> single-pulse search -> candidates,
// for every beam (issue 4, "Pipeline").
//
// It is the file search (search.hpp, search_filterbank()) run on every beam of a beamformer
// (beamform.hpp) as the beams are formed: each beam's power [time][chan] is a float32 filterbank
// (tsamp = the voltages' tsamp x integration, fch1/foff = the voltage channels), cut into the
// same gulps as search_filterbank() would cut that filterbank (a search::FileSearchPlan of the
// beams' header: owned ranges of `gulp` samples, a margin of boxcar_max samples each side,
// input rows [p0, p1 + max_delay)), and searched by the same GulpSearcher. Blocks of voltages
// arrive one at a time; their beams are appended to a buffer of rows per beam, and every gulp whose
// rows are all there is searched for every beam; the rows that the next gulp still needs (its
// margin and the maximum dispersion delay) stay in the buffer, so a pulse across a block or gulp
// boundary is found exactly as in the file. Hence, for a beam b, the candidates equal those of
// search_filterbank() on the filterbank `warpbeam beamform` writes for b, with the same gulp (the
// tests check this).
//
// Backend cuda: the beams never leave the GPU. Voltage blocks are copied (pinned host buffer,
// one copy stream) while the previous block is beamformed (a compute stream); each gulp of each
// beam is copied device to device into the input of the search's CUDA GulpSearcher (the file
// search's: RFI stage, channel-major dedispersion, plane search) on two search streams, so one
// beam's RFI stage overlaps the previous beam's dedispersion and search. Only the RFI statistics
// (12 bytes per channel per beam and gulp) and the peaks come back: PipelineResult counts the bytes
// copied each way.
//
// Several workers (devices of PipelineConfig::devices, or MPI ranks of PipelineConfig::comm): see
// Split. Splitting channels is a corner turn: worker p ingests sub-band p of every block, forms
// every beam over it, and sends beam b's rows [nb][sub-band] to the worker that searches b, into
// columns [c0_p, c1_p) of its buffer (a peer copy between devices, MPI_Alltoallv between
// ranks). The beams' rows are then those one worker would hold (the beamformer forms each
// channel independently), so the search and its candidates are too.
//
// Config -> Plan -> execute per block -> finish, as every engine (DESIGN.md).

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/beamform.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/dist/comm.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/io/voltages.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::pipeline {

/// How the work is cut over several workers (devices of one process, or MPI ranks).
enum class Split {
  automatic,  ///< channels (one worker: nothing to split)
  /// Each worker ingests a sub-band of the channels (1/N of the voltages), forms every beam
  /// there, and sends each beam's sub-band rows to the worker that searches that beam (a corner
  /// turn: peer copies between devices, MPI_Alltoallv between ranks); the beams are searched
  /// in contiguous shares. Moves the beams' bytes between workers instead of the voltages
  /// to every worker.
  channels,
  /// Each worker ingests every voltage block and forms and searches its own share of the beams
  /// (the BEST-2 paper's scheme: no exchange; every worker's link carries all the voltages).
  beams,
};
const char* to_string(Split s);
/// "auto", "channels" or "beams"; throws invalid_argument otherwise.
Split parse_split(const std::string& s);

struct PipelineConfig {
  beamform::ArrayGeometry array;              ///< must have as many antennas as the voltages
  std::vector<beamform::Pointing> pointings;  ///< one beam each (RA/Dec beams track)
  int integration = 1;                        ///< voltage samples per beam sample
  beamform::Algorithm algorithm = beamform::Algorithm::automatic;
  bool int8_weights = false;  ///< beamform::BeamformConfig::int8_weights: automatic may use int8
  beamform::CudaTuning tuning;
  /// The search of every beam: DM range, S/N threshold, boxcar_max, baseline, RFI, clustering.
  search::FileSearchConfig search;
  /// How it runs: gulp (0: halved from the file search's default until the beam buffer fits the
  /// memory budget too; see PipelinePlan), threads (also the CPU beamformer's), memory budgets,
  /// device (cuda, without `devices`), gpu_streams, progress.
  search::RunOptions run;
  /// cuda: the devices (issue 7's --gpus), one worker each (a device listed twice gets two:
  /// how one GPU tests the split). Empty: run.device alone. Under MPI (comm of several ranks)
  /// each rank is one worker on devices[local rank mod devices.size()] (empty: local rank mod
  /// the visible devices).
  std::vector<int> devices;
  /// How the workers share the work (see Split). The beams' rows and candidates do not depend
  /// on it or on the number of workers: the candidates are merged in beam order on the host
  /// (rank 0 under MPI), identical to one worker's.
  Split split = Split::automatic;
  /// The processes of the run (dist::Comm::world() under mpirun); null or a world of one: this
  /// process alone. With several ranks each rank is one worker (a sub-band, or a share of the
  /// beams); every rank must call the pipeline with the same arguments, and rank 0's finish()
  /// returns every rank's candidates (the others return none).
  const dist::Comm* comm = nullptr;
  /// Throws invalid_argument naming the field.
  void validate() const;
  nlohmann::json to_json() const;
};

/// What the pipeline found and how it ran.
struct PipelineResult {
  io::FilterbankHeader header;  ///< the beams' filterbank header (beam 0's; nsamples = all)
  std::string backend;          ///< "cpu" or "cuda"
  std::string algorithm;        ///< the beamformer's
  std::vector<int> devices;     ///< cuda: the device of each worker, in worker order
  std::string split;            ///< "channels" or "beams"
  int workers = 1;              ///< devices or ranks that shared the work
  int ranks = 1;                ///< MPI ranks (1: one process)
  int nbeams = 0;
  std::vector<float> dms;
  std::vector<search::Candidate> candidates;  ///< every beam: S/N descending, then beam, sample
  std::int64_t blocks = 0;
  std::int64_t samples_per_block = 0;  ///< beam samples per voltage block
  std::int32_t max_delay = 0;          ///< samples, at the largest DM
  std::int64_t gulp = 0, gulps = 0, margin = 0, dm_chunk = 0;
  /// Bytes of the beams formed (nbeams x samples x nchans x 4): what a pipeline that copied the
  /// beams back would move.
  std::int64_t beam_bytes = 0;
  std::int64_t beam_buffer_bytes = 0;  ///< the buffer of beam rows (host or device)
  /// cuda: bytes copied host -> device (voltages, weights, RFI decisions) and device -> host
  /// (RFI statistics, peak counts and peaks); device -> device (beam rows to the search).
  std::int64_t bytes_to_device = 0, bytes_from_device = 0, bytes_device_to_device = 0;
  /// Several workers: beam rows copied from one device's formed beams to another device's buffer
  /// (peer copies), and bytes sent between MPI ranks (the channel split's corner turn).
  std::int64_t bytes_between_devices = 0, bytes_between_ranks = 0;
  /// Seconds: wall time of the whole run; read = host reads of the voltage file (the driver's);
  /// beamform and search = wall time the host spent issuing and waiting for them (cuda: the
  /// copy of a block overlaps the beamforming of the previous one).
  double seconds_total = 0, seconds_read = 0, seconds_beamform = 0, seconds_search = 0;
  /// Of seconds_total: planning (weights, layout, the buffers and plans of every device, once per
  /// run); the rest is the stream itself (what a long observation's rate converges to).
  double seconds_plan = 0;
  /// Of seconds_search: the search's stages summed over gulps and beams (GulpSearcher's
  /// StageTimes; cuda: device time between events, so they may overlap the host's work): the
  /// rows into the searcher (read), RFI cleaning, dedispersion and the plane search.
  double seconds_search_read = 0, seconds_rfi = 0, seconds_dedisp = 0, seconds_plane_search = 0;
  /// Blocks given as zeros (execute_zeros: a live stream's blocks that never came), and the
  /// gulps not searched because every row they read came from such blocks (zeros give no peak:
  /// every DM trial's rms is 0, which the search skips), with the seconds those blocks took
  /// (the searches of the gulps they completed included; those are in seconds_search too).
  std::int64_t zero_blocks = 0, gulps_skipped = 0;
  double seconds_zero_blocks = 0;
  double observation_s = 0;  ///< the voltages' duration: real-time factor = observation_s / total
  /// Planned open-ended (PipelinePlan::open_ended): the stream's length came with its end.
  bool open_ended = false;
  /// run_pipeline on cuda: the blocks were read into a page-locked buffer (copied by DMA).
  bool input_pinned = false;
  nlohmann::json to_json() const;  ///< everything but the candidates
};

namespace detail {
class PipelineExecutor;
}

/// A pipeline for one voltage stream. execute() takes one block at a time.
class PipelinePlan {
 public:
  /// Validates, computes the weights at info.mjd_start (throws invalid_argument for a beam below
  /// the horizon or an antenna count that does not match `info`), plans the search of beams of
  /// nblocks x block_samples / integration samples (throws invalid_argument when they are
  /// shorter than the largest dispersion delay) and allocates every buffer. `nblocks`: the
  /// whole blocks the stream holds. The beam buffer holds rows = plane + max_delay + one block
  /// per beam; with run.gulp = 0 the gulp is halved from the file search's default until it
  /// fits what the search leaves of run.memory_bytes (cpu) or half of the device budget (cuda).
  ///
  /// `nblocks` = open_ended: a live stream whose length is known only at its end. The search
  /// is planned as if the stream were endless (the gulps are those of a long file: gulp and DM
  /// chunk do not depend on the length once it exceeds a gulp and its margins), every gulp
  /// whose rows are all there is searched as they come, and finish() plans the tail for the
  /// blocks given: the gulps not yet searched are cut as the file search cuts a file of that
  /// length. Hence the candidates equal run_pipeline()'s on the same blocks whenever the
  /// file's plan has the open-ended plan's gulp (a stream at least a gulp, its margins and the
  /// largest delay long, or one whose gulp was not halved for memory); otherwise the gulps
  /// searched before the end keep the open-ended gulp (PipelineResult::gulp says which).
  PipelinePlan(PipelineConfig config, const io::VoltageStreamInfo& info, std::int64_t nblocks,
               Backend backend);
  /// The `nblocks` of a stream whose length is not known in advance (see above).
  static constexpr std::int64_t open_ended = -1;
  ~PipelinePlan();
  PipelinePlan(PipelinePlan&&) noexcept;
  PipelinePlan& operator=(PipelinePlan&&) noexcept;

  Backend backend() const;
  /// Beamforms one block ([chan][time][antenna][pol], info.block_bytes() bytes, host memory; on
  /// cuda a pageable block is staged through a pinned buffer per device, a pinned one (e.g. a
  /// PinnedArray the caller reads into) is copied to every device directly, the copies
  /// overlapping; either way the block may be reused when this returns, before the GPU is done;
  /// pinned input avoids a host memcpy per device and block) starting at
  /// UTC `mjd` (tracking beams get new weights), and searches every gulp that is complete.
  /// Throws invalid_argument after nblocks blocks (never when open-ended) or for a wrong size.
  void execute(const std::uint8_t* block, std::size_t bytes, double mjd);
  /// A block of zeros (one of a live stream that never came, or was dropped): the same products
  /// as execute() of a zero-filled block, without its cost: its beams are zeros (not formed),
  /// and a gulp whose rows all come from such blocks is not searched (the search of zeros finds
  /// no peak: every DM trial's rms is 0, below SearchConfig::min_rms). Throws as execute().
  void execute_zeros(double mjd);
  /// The candidates made final since the last call (or the start), in the order they were
  /// found (gulp by gulp; within a gulp, beam by beam): each is final, so a live pipeline can
  /// append them to its products as it goes. This process's beams only (under MPI, each rank
  /// its own); finish() returns every candidate again, sorted.
  std::vector<search::Candidate> take_candidates();
  /// After the last block: the candidates of every beam and the summary. Throws
  /// invalid_argument when fewer than nblocks blocks were given; open-ended, when the blocks
  /// given are shorter than the largest dispersion delay (FileSearchPlan's message).
  PipelineResult finish();

 private:
  std::unique_ptr<detail::PipelineExecutor> exec_;
};

/// Runs the pipeline over a whole voltage stream with `nblocks` whole blocks (read with
/// reader.read_block(); on cuda into a buffer page-locked in place, HostRegistration). Progress on
/// stderr when it is a terminal (run.progress). Under MPI (config.comm of several ranks) every
/// rank reads the stream; a rank's error in planning or reading stops every rank with the same
/// AgreedError.
PipelineResult run_pipeline(io::VoltageReader& reader, std::int64_t nblocks,
                            const PipelineConfig& config, Backend backend);

}  // namespace warpbeam::pipeline
