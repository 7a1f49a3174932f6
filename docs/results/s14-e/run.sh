#!/bin/bash
# Device run E: is the B1 SPEAD capture bound per packet? 0.66 GB/s for 20 s with heaps of 256
# samples (8 kB, the default) and of 1024 (32 kB), then 1.0 GB/s with 1024.
set -u
T0=$(date +%s)
[ -d build-gpu ] || tar xJf .stage/build-gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d; mkdir -p $R; wb=build-gpu/bin/warpbeam; work=$(mktemp -d)
timeout 120 $wb simulate voltages --out $work/b1.raw --nchans 1024 --nsamples 81920 --block-samples 8192 --seed 2 > $R/sim.log 2>&1
port=47300
run() { # NAME RATE HEAPSAMPLES LOOPS
  timeout 90 taskset -c 2-5 $wb pipeline --listen spead://127.0.0.1:$port --blocks $(( $4 * 10 )) \
    --grid azel:170:190:8:60:70:4 --dm-max 100 --integrate 16 --boxcar-max 256 --baseline 1 --backend cuda \
    --ring-blocks 16 --idle-timeout 2 --capture-core 2 --socket-buffer 512 --out $work/p-$1 --json $R/$1.json > $R/$1.log 2>&1 &
  local pid=$!; sleep 2
  timeout 80 taskset -c 8-11 $wb send voltages $work/b1.raw spead://127.0.0.1:$port --rate $2 --heap-samples $3 \
    --loops $4 --json $R/$1-send.json >> $R/$1.log 2>&1
  wait $pid; echo "$1 rc=$? at $(( $(date +%s)-T0 ))" >> $R/rc.txt
  port=$((port+1))
}
run h512-0.66 0.66 512 5
run h1024-0.66 0.66 1024 5
run h1024-1.0 1.0 1024 5
run h1024-1.5 1.5 1024 8
cd $OUT && tar czf e.tgz d && rm -rf d
