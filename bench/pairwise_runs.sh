#!/usr/bin/env bash
# Pairwise core benchmarks (issue 3): N complete runs (default 3), each = the criterion bench
# plus the numpy peer in the same run, saved under bench/out/pairwise-runK/; then the
# docs/BENCHMARKS.md tables (medians over the runs) are printed.
#
#   bench/pairwise_runs.sh [N]
#
# Needs the venv: python3 -m venv bench/.venv && bench/.venv/bin/pip install -r bench/requirements.txt
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
for k in $(seq 1 "$runs"); do
  rm -rf target/criterion/huber_loss_grad target/criterion/score_block target/criterion/crossover
  cargo bench --bench pairwise -- --warm-up-time 1 --measurement-time 3
  out=bench/out/pairwise-run$k
  rm -rf "$out" && mkdir -p "$out"
  cp -r target/criterion "$out/criterion"
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 bench/.venv/bin/python bench/pairwise_numpy.py > "$out/numpy.json"
done
bench/.venv/bin/python bench/pairwise_report.py bench/out/pairwise-run*
