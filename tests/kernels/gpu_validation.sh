#!/usr/bin/env bash
# One-shot GPU validation on a machine with a CUDA GPU: every `gpu` test of tests/kernels (backward and forward), the cute
# lowering tests and the API and integration GPU tests, in parallel pytest processes (one GPU, many CPU cores:
# compiles overlap), plus compute-sanitizer memcheck and racecheck on the small GQA + padding + band + sink
# configuration, on the tail shapes of every tile family and on small packed problems (test_sanitizer_case). Each job runs under `timeout`.
# Usage: bash tests/kernels/gpu_validation.sh OUT_DIR [LIMIT_S]; logs in OUT_DIR/*.log, summary on stdout.
# GPU_JOBS="name name ..." runs only the named jobs (fewer processes share the CPU cores that compile).
# The integration tests need the transformers the adapter accepts: carry it in the bundle
# (benchmarks/tools/transformers_slim.sh); a job in which no test ran says so in the summary.
set -u
out=${1:?out dir}; lim=${2:-170}
mkdir -p "$out"
source benchmarks/tools/use_transformers_slim.sh
job() { local name=$1; shift
  case " ${GPU_JOBS:-$name} " in *" $name "*) ;; *) return ;; esac
  (timeout "$lim" "$@" > "$out/$name.log" 2>&1; echo "rc=$?" >> "$out/$name.log") & }
PT="python3 -m pytest -q -p no:cacheprovider -m gpu"
K=tests/kernels
job core_f16 $PT $K/test_kernels_gpu.py -k "test_matrix and float16 and not bfloat16"
job core_bf16 $PT $K/test_kernels_gpu.py -k "test_matrix and bfloat16"
job core_rest $PT $K/test_kernels_gpu.py -k "not test_matrix"
job feat_edges $PT $K/test_kernels_features_gpu.py -k "edges or bad_runtime"
job feat_rand01 $PT $K/test_kernels_features_gpu.py -k "random_matrix and (0 or 1)"
job feat_rand23 $PT $K/test_kernels_features_gpu.py -k "random_matrix and (2 or 3)"
job feat_det $PT $K/test_kernels_features_gpu.py -k "deterministic_bitwise or sanitizer_features or deterministic_modes"
job engine $PT $K/test_engine_features_gpu.py tests/lowering/test_gpu_cute.py tests/lowering/test_gpu_multi_device.py
job fwd_dims $PT $K/test_forward_gpu.py -k "test_head_dims"
job fwd_rest $PT $K/test_forward_gpu.py -k "not test_head_dims and not sanitizer_case and not variant"
job fwd_var64 $PT $K/test_forward_gpu.py -k "variant and d64"
job fwd_var128 $PT $K/test_forward_gpu.py -k "variant and not d64"
job api_gpu $PT tests/api
job integrations_gpu $PT tests/integrations
job varlen_fwd $PT $K/test_varlen_gpu.py -k "test_forward"
job varlen_bwd64 $PT $K/test_varlen_gpu.py -k "test_backward and 64"
job varlen_bwd128 $PT $K/test_varlen_gpu.py -k "test_backward and 128"
job varlen_twins $PT $K/test_varlen_gpu.py -k "packed_equals"
job varlen_bwd256 $PT $K/test_varlen_gpu.py -k "test_backward and 256"
job varlen_wide $PT $K/test_varlen_gpu.py -k "past_2_32"
job nonfinite $PT $K/test_nonfinite_gpu.py
job deferred_checks $PT $K/test_deferred_checks_gpu.py
job bench_hold $PT tests/bench/test_sm120_hold.py
SAN="compute-sanitizer --report-api-errors no"
job memcheck $SAN --tool memcheck $PT $K/test_kernels_features_gpu.py -k sanitizer_features
job racecheck $SAN --tool racecheck $PT $K/test_kernels_features_gpu.py -k "sanitizer_features and default"
job racecheck_det $SAN --tool racecheck $PT $K/test_kernels_features_gpu.py -k "sanitizer_features and deterministic"
job memcheck_core $SAN --tool memcheck $PT $K/test_kernels_gpu.py -k sanitizer_case
job racecheck_core $SAN --tool racecheck $PT $K/test_kernels_gpu.py -k sanitizer_case
job memcheck_fwd $SAN --tool memcheck $PT $K/test_forward_gpu.py -k sanitizer_case
job racecheck_fwd $SAN --tool racecheck $PT $K/test_forward_gpu.py -k sanitizer_case
job memcheck_varlen $SAN --tool memcheck $PT $K/test_varlen_gpu.py -k sanitizer_case
job racecheck_varlen $SAN --tool racecheck $PT $K/test_varlen_gpu.py -k sanitizer_case
wait
for f in "$out"/*.log; do
  counts=$(grep -hE '(passed|failed|error)( |,|$).*in [0-9.]+s' "$f" | tail -1)
  # pytest exits 5 when nothing ran (e.g. every module skipped): say so instead of printing an empty line
  [ -n "$counts" ] || counts="NO TEST RAN: $(grep -hE '(skipped|deselected).* in [0-9.]+s' "$f" | tail -1)"
  echo "== $(basename "$f" .log): $counts $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1)" "$(tail -1 "$f")"
done
