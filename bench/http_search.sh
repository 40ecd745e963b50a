#!/usr/bin/env bash
# HTTP load test of issue 12: wrk cycles the 600 queries of bench/queries/rust-docs.txt through
# `GET /search` with the server's default parameters, 2 threads, 4 connections, 30 s.
#
#   bench/http_search.sh ADDR [DURATION] [CONNECTIONS] [EXTRA_QUERY]
#   e.g. bench/http_search.sh 127.0.0.1:8080
#        bench/http_search.sh 127.0.0.1:8080 30s 4 'k=10&model=bm25'
#
# ADDR must be a loopback address with a running `rankd serve`. Prints wrk's report on stderr
# and a summary (req/s, p50, p99, errors) on stdout; WRK_QUERIES=FILE changes the query file.
# Installs wrk (Debian package) when it is missing.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 4 ]; then
  sed -n '5,7p' "$0" >&2
  exit 2
fi
ADDR="$1"
DURATION="${2:-30s}"
CONNECTIONS="${3:-4}"
EXTRA="${4:-}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export WRK_QUERIES="${WRK_QUERIES:-$ROOT/bench/queries/rust-docs.txt}"

HOST="${ADDR%:*}"
case "$HOST" in
  127.* | localhost | "[::1]") ;;
  *) echo "http_search: $ADDR is not a loopback address" >&2; exit 2 ;;
esac
case "$DURATION" in
  *[!0-9smh]* | "") echo "http_search: DURATION like 30s, 2m" >&2; exit 2 ;;
esac
THREADS=2
[ "$CONNECTIONS" -lt "$THREADS" ] && THREADS="$CONNECTIONS"

if ! command -v wrk >/dev/null 2>&1; then
  echo "http_search: installing wrk" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

# The server must answer before the clock starts.
if ! python3 - "$ADDR" <<'EOF'
import sys, time, urllib.request
for _ in range(20):
    try:
        urllib.request.urlopen(f"http://{sys.argv[1]}/livez", timeout=2).read()
        sys.exit(0)
    except Exception:
        time.sleep(0.5)
sys.exit(1)
EOF
then
  echo "http_search: no server answers http://$ADDR/livez" >&2
  exit 1
fi

# Seconds wrk may take at most: the duration plus a minute's margin, then it is stopped.
secs="${DURATION%[smh]}"
case "$DURATION" in *m) secs=$((secs * 60)) ;; *h) secs=$((secs * 3600)) ;; esac
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
timeout --signal=INT --kill-after=10 $((secs + 60)) \
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 10s --latency \
  -s "$ROOT/bench/wrk_search.lua" "http://$ADDR" -- "$EXTRA" >"$OUT"
grep -v '^wrk_json ' "$OUT" >&2
python3 - "$OUT" "$ADDR" "$DURATION" "$CONNECTIONS" "$THREADS" "$EXTRA" <<'EOF'
import json, sys
out, addr, duration, conns, threads, extra = sys.argv[1:]
line = next((l for l in open(out) if l.startswith("wrk_json ")), None)
if line is None:
    sys.exit("http_search: wrk printed no summary")
r = json.loads(line[len("wrk_json "):])
errors = r["non2xx"] + sum(r["socket_errors"].values())
print(f"GET http://{addr}/search?q=..{('&' + extra) if extra else ''}: {threads} threads, "
      f"{conns} connections, {duration}")
print(f"req/s {r['rps']:.1f}  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  "
      f"errors {errors} (non-2xx {r['non2xx']}, socket {r['socket_errors']})  requests {r['requests']}")
print("json " + json.dumps({"addr": addr, "duration": duration, "connections": int(conns),
                            "threads": int(threads), "extra": extra, **r}))
EOF
