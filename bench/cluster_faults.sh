#!/usr/bin/env bash
# Issue 31's hung-peer and readiness acceptance on loopback: three leaves over the shards of
# SHARDED_DIR (shard 1 twice, from a copy of its directory), a root over them, wrk with the
# 600 Rust-docs queries (bench/http_search.sh). Measures, one after the other:
#   1. healthy: req/s and p99 through the root;
#   2. one replica of shard 1 hung (kill -STOP) beside a healthy one: the same, after the
#      root's health check has seen it (target: p99 <= 2x healthy);
#   3. shard 1's only replica hung, partial answers allowed (a root over the hung one only):
#      req/s (target: >= 50% of healthy), every answer within the search deadline;
#   4. with no traffic, a root with partial answers off: time from kill -STOP / kill -9 to
#      /readyz 503, and from kill -CONT / restart to 200 (target: <= 2 s);
#   5. (before 2) shard 1's first replica slowed (stopped 20 ms of every 50) beside a healthy
#      peer: adaptive replica selection against rendezvous order alone.
#
#   bench/cluster_faults.sh RANKD SHARDED_DIR [DURATION]
#   e.g. bench/cluster_faults.sh target/release/rankd /tmp/sharded 15s
#
# Ports 18201-18204 (leaves), 18210-18213 (roots) on 127.0.0.1. Prints markdown lines.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '12,13p' "$0" >&2; exit 2; fi
RANKD="$1"; SHARDED="$2"; DURATION="${3:-15s}"
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$COPY" "$SCRATCH"
}
COPY="$(mktemp -d)"; SCRATCH="$(mktemp -d)"
trap cleanup EXIT
export RANKD_LOG=error
export RANKD_CLUSTER_KEY="${RANKD_CLUSTER_KEY:-bench-cluster-key-$RANDOM$RANDOM$RANDOM}"
cp -r "$SHARDED/shards/1" "$COPY/shard1b"
leaf() { # port dir; its pid in LAST
  "$RANKD" serve --role leaf --data-dir "$2" --addr "127.0.0.1:$1" >"$SCRATCH/leaf-$1.log" 2>&1 &
  LAST=$!; PIDS+=("$LAST")
}
wait_up() {
  for _ in $(seq 120); do curl -sf "http://$1/livez" >/dev/null && return 0; sleep 0.25; done
  echo "cluster_faults: nothing answers $1" >&2; exit 1
}
leaf 18201 "$SHARDED/shards/0"; leaf 18202 "$SHARDED/shards/1"; L1=$LAST
leaf 18203 "$COPY/shard1b"; leaf 18204 "$SHARDED/shards/2"
for p in 18201 18202 18203 18204; do wait_up "127.0.0.1:$p"; done
root() { # port partial shard1-replicas [more flags]
  "$RANKD" serve --role root --addr "127.0.0.1:$1" --allow-partial-results "$2" \
    --data-dir "$SCRATCH/root-$1" --shard http://127.0.0.1:18201 --shard "$3" \
    --shard http://127.0.0.1:18204 "${@:4}" >/dev/null 2>&1 & PIDS+=($!)
}
root 18210 true "http://127.0.0.1:18202,http://127.0.0.1:18203"
root 18211 true "http://127.0.0.1:18202"
root 18212 false "http://127.0.0.1:18202"
root 18213 true "http://127.0.0.1:18202,http://127.0.0.1:18203" --adaptive-replicas false
for p in 18210 18211 18212 18213; do wait_up "127.0.0.1:$p"; done
load() { "$ROOT_DIR/bench/http_search.sh" "127.0.0.1:$1" "$DURATION" 4 2>/dev/null | grep "^req/s"; }
echo "| case | summary |"
echo "|---|---|"
echo "| healthy, root over 4 leaves (shard 1 twice) | $(load 18210) |"
echo "| healthy, root over shard 1's first replica only | $(load 18211) |"
# A slow replica: shard 1's first one stopped 20 ms of every 50 (a busy host), beside a
# healthy peer; adaptive replica selection (18210) against rendezvous order alone (18213).
( while :; do kill -STOP "$L1" 2>/dev/null; sleep 0.02; kill -CONT "$L1" 2>/dev/null; sleep 0.03; done ) &
SLOW=$!
echo "| shard 1's first replica slow, adaptive selection | $(load 18210) |"
echo "| shard 1's first replica slow, rendezvous order only | $(load 18213) |"
kill "$SLOW"; wait "$SLOW" 2>/dev/null || true; kill -CONT "$L1"; sleep 2
kill -0 "$L1" || { echo "cluster_faults: the leaf of shard 1 died:" >&2; cat "$SCRATCH/leaf-18202.log" >&2; exit 1; }
kill -STOP "$L1"; sleep 3
echo "| shard 1's first replica hung, its peer healthy | $(load 18210) |"
echo "| shard 1's only replica hung, partial answers | $(load 18211) |"
kill -CONT "$L1"; sleep 3
# Readiness with no traffic (root 18212: partial answers off, shard 1 on one replica).
ready_after() { # expected status; prints seconds until /readyz answers it
  local want="$1" start; start=$(date +%s.%N)
  for _ in $(seq 400); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 http://127.0.0.1:18212/readyz || true)
    if [ "$code" = "$want" ]; then echo "$(echo "$(date +%s.%N) - $start" | bc)"; return; fi
    sleep 0.05
  done
  echo "never"
}
[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18212/readyz)" = 200 ]
kill -STOP "$L1"; t_hang=$(ready_after 503)
kill -CONT "$L1"; t_back=$(ready_after 200)
kill -9 "$L1"; t_dead=$(ready_after 503)
leaf 18202 "$SHARDED/shards/1"; L1=$LAST; t_restart=$(ready_after 200)
echo "| /readyz, no traffic: hung -> 503 | ${t_hang} s |"
echo "| /readyz, no traffic: resumed -> 200 | ${t_back} s |"
echo "| /readyz, no traffic: kill -9 -> 503 | ${t_dead} s |"
echo "| /readyz, no traffic: restarted -> 200 (includes the leaf's start) | ${t_restart} s |"
