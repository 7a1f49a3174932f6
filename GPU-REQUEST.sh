#!/usr/bin/env bash
# GPU-REQUEST (helper dd, issue 13, must-show 2): the D1 search end to end with the gulps read
# one ahead on a reader thread and each read split among --read-threads threads; every stage's
# time. Run from the repo root with the CUDA build (branch dd) at build-gpu/; writes under $OUT.
# ~4-5 minutes of device time (9 + 3 bench runs of ~1.5-2.5 s each after a ~5 s simulation, tests).
set -uo pipefail
B=build-gpu
[ -d "$B/lib" ] && export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
W=$B/bin/warpbeam; [ -x "$W" ] || W=$B/warpbeam
mkdir -p "$OUT"
{ nvidia-smi -L; nproc; "$W" --version; } >"$OUT/machine.txt" 2>&1

# GPU tests of the search and of dedispersion (CUDA against the CPU), then the new CPU tests of
# the reader (they run on the GPU host's 16 cores, whose read-thread default is 8).
$B/tests/test_search --gtest_filter='*Gpu*:SearchFile.ReadThreads*:SearchPlanFile.*' \
  --gtest_color=no >"$OUT/test_search.log" 2>&1; echo "test_search rc=$?" >>"$OUT/rc.txt"
$B/tests/test_dedisp --gtest_filter='*Gpu*' --gtest_color=no >"$OUT/test_dedisp.log" 2>&1
echo "test_dedisp rc=$?" >>"$OUT/rc.txt"
$B/tests/test_sigproc --gtest_filter='Sigproc.ReadThreads*' --gtest_color=no \
  >"$OUT/test_sigproc.log" 2>&1; echo "test_sigproc rc=$?" >>"$OUT/rc.txt"

# D1 end to end, 3 runs each (median reported), each method; every record starts with the read
# stage alone (1 thread against the default read threads, pinned buffer, page cache).
for m in brute subband auto; do
  "$W" bench search --config D1 --backend cuda --dedisp "$m" --repeats 3 \
    --json "$OUT/search-$m.json" >"$OUT/search-$m.txt" 2>&1
  echo "search $m rc=$?" >>"$OUT/rc.txt"
done
# The same with one read thread (the read ahead, not split): what the split adds.
"$W" bench search --config D1 --backend cuda --dedisp subband --repeats 3 --read-threads 1 \
  --json "$OUT/search-subband-rt1.json" >"$OUT/search-subband-rt1.txt" 2>&1
echo "search subband read-threads 1 rc=$?" >>"$OUT/rc.txt"
grep -h -E "^search D1|^stages|^host|^read stage" "$OUT"/search-*.txt >"$OUT/summary.txt"
cat "$OUT/rc.txt" >>"$OUT/summary.txt"
