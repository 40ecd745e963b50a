#!/usr/bin/env bash
# Issue 13's replication benchmark: publish-to-visible time of an index generation and the
# bytes it ships. A copy of a collection split by `rankd ingest --shards 3` is published to a
# store (a local directory, or S3 on moto's server on loopback); a leaf following shard 0
# (`serve --role leaf --store --shard-id 0 --poll-ms 100`) bootstraps from it; then ROUNDS
# times a batch of BATCH new documents is ingested into the collection and published, and the
# script times how long after `rankd publish` returned the leaf serves the new generation.
#
#   bench/cluster_generations.sh RANKD SHARDED_DIR local|s3 [ROUNDS] [BATCH]
#   e.g. bench/cluster_generations.sh target/release/rankd /tmp/sharded s3 5 200
#
# s3 needs bench/.venv (moto[server]). Port 18201 (leaf) and 18299 (moto) on 127.0.0.1.
# Prints one JSON line per step on stdout.
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '9,10p' "$0" >&2; exit 2; fi
RANKD="$(realpath "$1")"; SHARDED="$2"; KIND="$3"; ROUNDS="${4:-5}"; BATCH="${5:-200}"
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export RANKD_LOG=error
# Every leaf and root of one collection shares the cluster key (docs/OPERATIONS.md).
export RANKD_CLUSTER_KEY="${RANKD_CLUSTER_KEY:-bench-cluster-key-$RANDOM$RANDOM$RANDOM}"
cp -r "$SHARDED" "$WORK/collection"
case "$KIND" in
  local) STORE="$WORK/store" ;;
  s3)
    "$ROOT_DIR/bench/.venv/bin/moto_server" -H 127.0.0.1 -p 18299 >/dev/null 2>&1 & PIDS+=($!)
    for _ in $(seq 100); do curl -s http://127.0.0.1:18299 >/dev/null && break; sleep 0.1; done
    export AWS_ENDPOINT_URL=http://127.0.0.1:18299 AWS_ALLOW_HTTP=true AWS_REGION=us-east-1 \
      AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
    curl -sf -X PUT http://127.0.0.1:18299/rankd-bench >/dev/null
    STORE=s3://rankd-bench/collection
    ;;
  *) echo "cluster_generations: store kind local or s3, not $KIND" >&2; exit 2 ;;
esac
now() { date +%s.%N; }
ms_since() { python3 -c 'import sys; print(round((float(sys.argv[2]) - float(sys.argv[1])) * 1e3, 1))' "$1" "$(now)"; }
publish() {
  "$RANKD" publish --data-dir "$WORK/collection" --store "$STORE" --json |
    python3 -c 'import json, sys
r = json.load(sys.stdin)["shards"][0]
print(json.dumps({k: r[k] for k in ["generation", "files", "bytes", "files_uploaded", "bytes_uploaded", "seconds"]}))'
}
echo "{\"step\": \"publish everything\", \"shard0\": $(publish)}"
t=$(now)
"$RANKD" serve --role leaf --data-dir "$WORK/replica" --store "$STORE" --shard-id 0 \
  --poll-ms 100 --addr 127.0.0.1:18201 2>/dev/null & PIDS+=($!)
for _ in $(seq 600); do curl -sf http://127.0.0.1:18201/livez >/dev/null && break; sleep 0.05; done
echo "{\"step\": \"bootstrap\", \"ms\": $(ms_since "$t")}"
generation() { curl -s -H "Authorization: Bearer $RANKD_CLUSTER_KEY" http://127.0.0.1:18201/cluster/v1/info | python3 -c 'import json, sys; print(json.load(sys.stdin)["store_generation"])'; }
for r in $(seq "$ROUNDS"); do
  python3 - "$WORK/batch.jsonl" "$r" "$BATCH" <<'PY'
import json, sys
path, r, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": f"bench-{r}-{i}", "url": f"https://x.org/bench/{r}/{i}",
                            "title": f"Batch {r} page {i}",
                            "body": f"A page added in round {r}: iterator vector slice {i}"}) + "\n")
PY
  "$RANKD" ingest --format jsonl --input "$WORK/batch.jsonl" --shards 3 --json \
    --data-dir "$WORK/collection" >/dev/null
  p=$(publish)
  t=$(now)
  want=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["generation"])' "$p")
  for _ in $(seq 2000); do [ "$(generation)" = "$want" ] && break; sleep 0.01; done
  echo "{\"step\": \"round $r\", \"shard0\": $p, \"visible_ms_after_publish\": $(ms_since "$t")}"
done
