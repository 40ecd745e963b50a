#!/usr/bin/env bash
# Issue 13's overhead benchmark: one rankd serving a whole index against a root over three
# leaves serving the same documents split by `rankd ingest --shards 3`, all on loopback on
# this machine (on 2 cores this measures the cost of sharding, not a speed-up). wrk drives
# `GET /search` with the 600 Rust-docs queries (bench/http_search.sh), alternating the single
# node, a root gathering statistics per search (`--stats gather`) and a root summing the
# shards' statistics tables (`--stats table`) ROUNDS times; each root's /metrics give the
# bytes its leaf calls moved per query.
#
#   bench/cluster_http.sh RANKD SINGLE_DIR SHARDED_DIR [ROUNDS] [DURATION] [EXTRA_QUERY]
#   e.g. bench/cluster_http.sh target/release/rankd /tmp/single /tmp/sharded 3 20s
#   (CONNS=1 for one connection at a time: latency without queueing; default 4)
#
# SINGLE_DIR is `rankd ingest ... --data-dir SINGLE_DIR`, SHARDED_DIR the same input with
# `--shards 3 --data-dir SHARDED_DIR`. Ports 18080 (single), 18090 (gather root), 18091 (table
# root), 18101-18103 (leaves) on 127.0.0.1. Prints one JSON line per run on stdout.
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '7,8p' "$0" >&2; exit 2; fi
RANKD="$1"; SINGLE="$2"; SHARDED="$3"; ROUNDS="${4:-3}"; DURATION="${5:-20s}"; EXTRA="${6:-}"
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
export RANKD_LOG=error
# Every leaf and root of one collection shares the cluster key (docs/OPERATIONS.md).
export RANKD_CLUSTER_KEY="${RANKD_CLUSTER_KEY:-bench-cluster-key-$RANDOM$RANDOM$RANDOM}"
"$RANKD" serve --data-dir "$SINGLE" --addr 127.0.0.1:18080 2>/dev/null & PIDS+=($!)
for s in 0 1 2; do
  "$RANKD" serve --role leaf --data-dir "$SHARDED/shards/$s" --addr "127.0.0.1:1810$((s + 1))" \
    2>/dev/null & PIDS+=($!)
done
wait_up() {
  for _ in $(seq 60); do curl -sf "http://$1/livez" >/dev/null && return 0; sleep 0.5; done
  echo "cluster_http: nothing answers $1" >&2; exit 1
}
for a in 127.0.0.1:18080 127.0.0.1:18101 127.0.0.1:18102 127.0.0.1:18103; do wait_up "$a"; done
for port_stats in 18090:gather 18091:table; do
  "$RANKD" serve --role root --addr "127.0.0.1:${port_stats%%:*}" --stats "${port_stats##*:}" \
    --shard http://127.0.0.1:18101 --shard http://127.0.0.1:18102 \
    --shard http://127.0.0.1:18103 2>/dev/null & PIDS+=($!)
  wait_up "127.0.0.1:${port_stats%%:*}"
done
# The table root fetches the shards' tables in the background at its first search: wait for
# all three before measuring it, and report how long that took.
t0=$(date +%s.%N)
for _ in $(seq 600); do
  curl -s 'http://127.0.0.1:18091/search?q=vec' >/dev/null
  n=$(curl -s http://127.0.0.1:18091/metrics |
    awk '/^rankd_cluster_leaf_call_duration_seconds_count\{call="table"/ { s += $2 } END { printf "%d", s }')
  [ "$n" = 3 ] && break
  sleep 0.1
done
table_bytes=$(curl -s http://127.0.0.1:18091/metrics |
  awk '/^rankd_cluster_bytes_total\{call="table"/ && /direction="received"/ { s += $2 } END { printf "%d", s }')
# Resident memory of the two roots (the gathering root holds no tables).
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
python3 -c 'import json, sys; print(json.dumps({"tables_ready_s": round(float(sys.argv[2]) - float(sys.argv[1]), 2), "table_bytes": int(sys.argv[3]), "root_gather_rss_kb": int(sys.argv[4]), "root_table_rss_kb": int(sys.argv[5])}))' \
  "$t0" "$(date +%s.%N)" "$table_bytes" "$(rss "${PIDS[-2]}")" "$(rss "${PIDS[-1]}")"
bytes() {
  curl -s "http://$1/metrics" |
    awk '/^rankd_cluster_bytes_total/ && !/call="table"/ { s += $2 } END { printf "%d", s }'
}
# CPU seconds (user + system) a process has used, in clock ticks.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
for r in $(seq "$ROUNDS"); do
  for who in single root root-table; do
    # The processes a search of this kind runs on: the single node, or a root and the leaves.
    case "$who" in
      single) addr=127.0.0.1:18080; procs="${PIDS[0]}" ;;
      root) addr=127.0.0.1:18090; procs="${PIDS[-2]} ${PIDS[*]:1:3}" ;;
      *) addr=127.0.0.1:18091; procs="${PIDS[-1]} ${PIDS[*]:1:3}" ;;
    esac
    before=$(bytes "$addr")
    cpu0=$(for p in $procs; do ticks "$p"; done | paste -sd,)
    line=$("$ROOT_DIR/bench/http_search.sh" "$addr" "$DURATION" "${CONNS:-4}" "$EXTRA" 2>/dev/null | grep '^json ')
    cpu1=$(for p in $procs; do ticks "$p"; done | paste -sd,)
    after=$(bytes "$addr")
    python3 -c '
import json, os, sys
r = json.loads(sys.argv[1][5:]); who, rnd, b0, b1, c0, c1 = sys.argv[2:]
per = (int(b1) - int(b0)) / r["requests"] if who != "single" else 0
# CPU ms per search of each process: the single node, or the root then leaves 0, 1, 2.
hz = os.sysconf("SC_CLK_TCK")
cpu = [round((int(b) - int(a)) * 1000 / hz / r["requests"], 3)
       for a, b in zip(c0.split(","), c1.split(","))]
print(json.dumps({"round": int(rnd), "who": who, "rps": r["rps"], "p50_ms": r["p50_ms"],
                  "p99_ms": r["p99_ms"], "errors": r["non2xx"] + sum(r["socket_errors"].values()),
                  "leaf_bytes_per_query": round(per), "cpu_ms_per_query": cpu}))' \
      "$line" "$who" "$r" "$before" "$after" "$cpu0" "$cpu1"
  done
done
