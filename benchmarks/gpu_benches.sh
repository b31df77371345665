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
#   host      (only when named) benchmarks/bench_host_overhead.py --real --busy: the parts of frost's host path per
#             call, on an idle GPU and with every call enqueued behind running work
#   autograd  (only when named) benchmarks/bench_autograd_host.py: frost.attention's forward + backward host time
#             beside its two functional calls, an empty autograd node, one thread, and replay off
#   replayloop (only when named) bench_length_checks.py --replay: the 24-layer loop's step and host times with
#             CUDA-graph replay on and off, in one process
#   replay    (only when named) the backward's host time per call in frost bench (two cases, frost alone) with CUDA-graph
#             replay on and off, two rounds each, into OUT_DIR/replay_{on,off}_{1,2}
#   padfwd padbwd padstep   (only when named) the standard suite's passes with FA4's launches padded to SM120's
#             occupancy as frost's are (frost bench --peer-smem padded), into OUT_DIR/padded
#   varlenpad (only when named) bench_varlen.py with FA4's launches padded the same way
#   ncu       (only when named) Nsight Compute on the forward's two limit rows: d128 without a mask, and the
#             gpt-oss 128-token window with a sink (benchmarks/ncu_kernels.py); then FA4's d128 forward as it launches
#             and padded to SM120's occupancy (its occupancy on this GPU against what SM120 would give it)
#   fwdvar    (only when named) bench_forward.py --variants on the d64 shapes: the served 128x64 tile against 128
#             keys a step (8 warps at one CTA per SM; 64 query rows at two), FA4's step width (its own 128x128 tile
#             with 4 warps spills in frost's kernel)
#   ncurows   (only when named) Nsight Compute on frost and FA4 (padded) side by side: the d64 forward (B4 H16 S4096),
#             the S1k d64 forward (B16), and the backward of the d128 256-token window (B4 H16 S4096)
# Usage: bash benchmarks/gpu_benches.sh OUT_DIR [STEPS (default: all)] [LIMIT_S per step (default 240)]
# A step may carry its own limit: "varlen:200,step:150" (steps run in the order of the script, not of STEPS).
set -u
out=${1:?out dir}; steps=${2:-lengths,varlen,hf,fwd,bwd,step}; default_lim=${3:-240}
mkdir -p "$out"
source benchmarks/tools/use_transformers_slim.sh
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
run host python3 benchmarks/bench_host_overhead.py --real --busy --calls 4000
run autograd python3 benchmarks/bench_autograd_host.py --calls 2000 --rounds 3
run replayloop python3 benchmarks/bench_length_checks.py --replay --steps 30 --json "$out/replayloop.json"
run replay bash -c "for r in 1 2; do for m in on off; do [ \$m = on ] && v=1 || v=0
    FROST_GRAPH_REPLAY=\$v python3 -m frost bench --suite standard --cases mha-d64-causal,gqa32 --pass backward \
        --backends frost --out $out/replay_\${m}_\$r > /dev/null 2>&1
    python3 -c \"import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], [(x['case'], \
        x.get('host_us')) for x in r['results']])\" $out/replay_\${m}_\$r/*.json \$m; done; done"
NCU="ncu --clock-control none --kernel-name regex:FwdKernel --launch-skip 1 --launch-count 1 --section SpeedOfLight"
NCU="$NCU --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
run ncu bash -c "$NCU python3 benchmarks/ncu_kernels.py --forward --batch 4 --heads 16 --seq 4096 --head-dim 128 &&
                 $NCU python3 benchmarks/ncu_kernels.py --forward --batch 2 --heads 64 --heads-kv 8 --seq 4096 \
                      --head-dim 64 --causal --window 127 --sink &&
                 ${NCU/regex:FwdKernel/regex:FlashAttentionForward} python3 benchmarks/ncu_kernels.py --fa4 --forward \
                      --batch 4 --heads 16 --seq 4096 --head-dim 128 &&
                 ${NCU/regex:FwdKernel/regex:FlashAttentionForward} python3 benchmarks/ncu_kernels.py --fa4 --forward \
                      --padded --batch 4 --heads 16 --seq 4096 --head-dim 128"
run fwdvar python3 benchmarks/bench_forward.py --variants --dims 64 --rounds 3 \
    --tiles "128,64,4,2,2,True;128,128,8,1,2,True;64,128,4,2,1,True"
NCU_FA4F="${NCU/regex:FwdKernel/regex:FlashAttentionForward} --section InstructionStats"
NCU_FA4B="${NCU/regex:FwdKernel/regex:FlashAttentionBackwardSm} --section InstructionStats"
NCU_BWD="${NCU/regex:FwdKernel/regex:BwdMain} --section InstructionStats"
run ncurows bash -c "for shape in '--batch 4 --seq 4096' '--batch 16 --seq 1024'; do
                       $NCU --section InstructionStats python3 benchmarks/ncu_kernels.py --forward --heads 16 \
                           --head-dim 64 \$shape && $NCU_FA4F python3 benchmarks/ncu_kernels.py --fa4 --padded \
                           --forward --heads 16 --head-dim 64 \$shape; done &&
                     $NCU_BWD python3 benchmarks/ncu_kernels.py --batch 4 --heads 16 --seq 4096 --head-dim 128 \
                         --causal --window 255 &&
                     $NCU_FA4B python3 benchmarks/ncu_kernels.py --fa4 --padded --batch 4 --heads 16 --seq 4096 \
                         --head-dim 128 --causal --window 255"
