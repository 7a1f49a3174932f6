#pragma once
// Single-pulse search: RFI cleaning of a filterbank gulp, then on each DM trial of a DM-time
// plane a running-median baseline, a robust RMS, boxcar matched filters of widths 1, 2, 4 ...
// boxcar_max normalised to unit noise RMS, peaks over a threshold, and friends-of-friends
// clustering of the peaks into candidates. The streaming driver (search_filterbank) reads a
// SIGPROC file of any length in gulps with bounded memory.
//
// The model is heimdall (Barsdell et al. 2012, MNRAS 422, 379; the pipeline in its
// Pipeline/ folder): median-of-5 decimation for the baseline and the RMS, boxcars from a prefix
// sum, "giants" (peaks) per DM trial and width, and clustering across sample, width and DM
// trial. What differs from heimdall is stated where it differs.
//
// This header includes the whole public search API, one header per concern:
//   search/stats.hpp        robust statistics (tree median, clipped RMS)
//   search/stages.hpp       the per-DM-trial stages, each defined exactly (baseline, boxcars,
//                           normalisation, peaks): what the CPU and CUDA executors both follow
//   search/plan.hpp         SearchConfig, SearchPlan: the stages on a DM-time plane
//   search/cluster.hpp      friends-of-friends clustering of peaks (cluster_peaks, Clusterer)
//   search/candidates.hpp   Candidate (a cluster with its DM and time)
//   search/rfi.hpp          RFI cleaning of a filterbank gulp
//   search/file_search.hpp  the file search: a filterbank searched in gulps

#include "warpbeam/search/candidates.hpp"
#include "warpbeam/search/cluster.hpp"
#include "warpbeam/search/file_search.hpp"
#include "warpbeam/search/plan.hpp"
#include "warpbeam/search/rfi.hpp"
#include "warpbeam/search/stages.hpp"
#include "warpbeam/search/stats.hpp"
