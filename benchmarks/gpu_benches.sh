#!/usr/bin/env bash
# Every benchmark the docs quote, in one call on a machine with a CUDA GPU (peers in the same processes). Each step
# runs under `timeout` and writes into OUT_DIR; a step that fails or times out does not stop the others. Steps:
#   lengths   benchmarks/bench_length_checks.py: the 24-layer loop with length checks off / sync / deferred
#   varlen    benchmarks/bench_varlen.py: packed vs padded vs dense frost vs FA4's varlen kernels
#   hf        benchmarks/bench_transformers.py --packed: padding-free vs padded training on the gpt-oss slice
#   fwd bwd step   frost bench --suite standard, each pass, with every peer
#   full      (only when named) frost bench --suite full --pass all --peer-smem padded --ceiling: every row the
#             performance page quotes (forward, backward, step, d256, deterministic twins, host time per call) in one
#             run, into OUT_DIR/full
#   host      (only when named) benchmarks/bench_host_overhead.py --real: the parts of frost's host path per call
#   padfwd padbwd padstep   (only when named) the standard suite's passes with FA4's launches padded to SM120's
#             occupancy as frost's are (frost bench --peer-smem padded), into OUT_DIR/padded
#   varlenpad (only when named) bench_varlen.py with FA4's launches padded the same way
#   ncu       (only when named) Nsight Compute on the forward's two limit rows: d128 without a mask, and the
#             gpt-oss 128-token window with a sink (benchmarks/ncu_kernels.py); then FA4's d128 forward as it launches
#             and padded to SM120's occupancy (its occupancy on this GPU against what SM120 would give it)
# Usage: bash benchmarks/gpu_benches.sh OUT_DIR [STEPS (default: all)] [LIMIT_S per step (default 240)]
# A step may carry its own limit: "varlen:200,step:150" (steps run in the order of the script, not of STEPS).
set -u
out=${1:?out dir}; steps=${2:-lengths,varlen,hf,fwd,bwd,step}; default_lim=${3:-240}
mkdir -p "$out"
limit_of() { local s; for s in ${steps//,/ }; do [ "${s%%:*}" = "$1" ] && { [ "$s" = "$1" ] && echo "$default_lim" || echo "${s#*:}"; return; }; done; }
run() { local name=$1; shift; lim=$(limit_of "$name"); [ -n "$lim" ] || return
        echo "== $name: $*"; start=$(date +%s)
        timeout "$lim" "$@" > "$out/$name.log" 2>&1; rc=$?
        echo "== $name: rc=$rc in $(( $(date +%s) - start )) s"; tail -n 25 "$out/$name.log"; }
run lengths python3 benchmarks/bench_length_checks.py --json "$out/lengths.json"
run varlen python3 benchmarks/bench_varlen.py --json "$out/varlen.json" --markdown "$out/varlen.md"
run varlenpad python3 benchmarks/bench_varlen.py --peer-smem padded --json "$out/varlen_padded.json" \
    --markdown "$out/varlen_padded.md"
run hf python3 benchmarks/bench_transformers.py --packed --seqs 4096,16384 --out "$out/hf_packed.md"
for pass in step fwd bwd padstep padfwd padbwd; do
  lim=$(limit_of $pass); [ -n "$lim" ] || continue
  case $pass in *fwd) which=forward;; *bwd) which=backward;; *) which=step;; esac
  case $pass in pad*) held="--peer-smem padded"; dir=padded;; *) held=""; dir=bench;; esac
  run $pass python3 -m frost bench --suite standard --pass "$which" $held --out "$out/$dir" --budget-s $((lim - 30))
done
lim=$(limit_of full)
[ -n "$lim" ] && run full python3 -m frost bench --suite full --pass all --peer-smem padded --ceiling \
    --out "$out/full" --budget-s $((lim - 60))
run host python3 benchmarks/bench_host_overhead.py --real --calls 4000
NCU="ncu --clock-control none --kernel-name regex:FwdKernel --launch-skip 1 --launch-count 1 --section SpeedOfLight"
NCU="$NCU --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
run ncu bash -c "$NCU python3 benchmarks/ncu_kernels.py --forward --batch 4 --heads 16 --seq 4096 --head-dim 128 &&
                 $NCU python3 benchmarks/ncu_kernels.py --forward --batch 2 --heads 64 --heads-kv 8 --seq 4096 \
                      --head-dim 64 --causal --window 127 --sink &&
                 ${NCU/regex:FwdKernel/regex:FlashAttentionForward} python3 benchmarks/ncu_kernels.py --fa4 \
                      --batch 4 --heads 16 --seq 4096 --head-dim 128 &&
                 ${NCU/regex:FwdKernel/regex:FlashAttentionForward} python3 benchmarks/ncu_kernels.py --fa4 --padded \
                      --batch 4 --heads 16 --seq 4096 --head-dim 128"
