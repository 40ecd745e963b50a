#!/usr/bin/env bash
# Nearest neighbours (issue 33, docs/BENCHMARKS.md "Nearest neighbours (issue 33)"): the exact
# scan against usearch, hnsw_rs and hannoy on a data directory's vectors, with the benchmark's
# 600 queries and the devsets' 198 topics embedded by the model that computed the vectors; then
# rankd's settings, on these vectors and at other sizes (the first rows, or the real rows plus
# perturbed copies, `--scale`).
#
#   bench/ann_bench.sh DATA_DIR MODEL_DIR [SCALE...]
#   e.g. bench/ann_bench.sh /tmp/demo-dense ~/.cache/rankd/all-MiniLM-L6-v2 20000 100000
#
# One thread for every search and build (RAYON_NUM_THREADS=1); prints markdown tables.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '8,9p' "$0" >&2
  exit 2
fi
DATA="$1"
MODEL="$2"
shift 2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
cargo build --release --features ann-bench --example ann_bench
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/ann_bench"
CACHE="$(mktemp --suffix=.queries)"
trap 'rm -f "$CACHE"' EXIT
rm -f "$CACHE"
QUERIES=(bench/queries/rust-docs.txt bench/devsets/questions.topics bench/devsets/items.topics)
export RAYON_NUM_THREADS=1
# The crates' usual settings (16 links, 128 candidates when adding, 64 when searching).
"$BIN" "$DATA/vectors.bin" "$MODEL" "${QUERIES[@]}" --query-cache "$CACHE" --runs 5
# rankd's settings (src/dense/ann.rs: the candidates when searching grow with the rows), here
# and at the larger sizes.
RANKD=(--m 32 --ef-add 256 --ef rankd)
"$BIN" "$DATA/vectors.bin" "$MODEL" "${QUERIES[@]}" --query-cache "$CACHE" --runs 3 \
  --engines exact,usearch,hnsw_rs "${RANKD[@]}"
for SCALE in "$@"; do
  "$BIN" "$DATA/vectors.bin" "$MODEL" "${QUERIES[@]}" --query-cache "$CACHE" --runs 3 \
    --scale "$SCALE" --engines exact,usearch "${RANKD[@]}"
done
