#!/bin/sh
# Ingest throughput of two rankd binaries on the same HTML directory (default: the Rust docs
# rustup installs), alternating runs (A B A B ...), each into a fresh data directory, so load
# on a shared machine hits both alike. Prints each run's `rankd ingest --json` summary, then
# the median wall seconds and documents per second of each binary.
#
# usage: bench/ingest_alternate.sh BEFORE_BIN AFTER_BIN [RUNS] [DOCS_DIR]
set -eu
before=$1
after=$2
runs=${3:-3}
docs=${4:-$(rustc --print sysroot)/share/doc/rust/html}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
i=1
while [ "$i" -le "$runs" ]; do
    for label in before after; do
        eval bin=\$$label
        rm -rf "$work/data"
        start=$(date +%s.%N)
        summary=$("$bin" ingest --format html --input "$docs" \
            --base-url https://doc.rust-lang.org/stable/ --json --data-dir "$work/data")
        end=$(date +%s.%N)
        echo "$label $i $(echo "$end - $start" | bc) $summary" | tee -a "$work/runs"
    done
    i=$((i + 1))
done
python3 - "$work/runs" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, _, wall, summary = line.split(" ", 3)
    runs.setdefault(label, []).append((float(wall), json.loads(summary)))
for label, rs in runs.items():
    walls = [w for w, _ in rs]
    dps = [s["docs_per_second"] for _, s in rs]
    s = rs[0][1]
    print(f"{label}: median wall {statistics.median(walls):.1f} s {walls}, median "
          f"{statistics.median(dps):.0f} docs/s {[round(d) for d in dps]}, "
          f"{s['documents']} documents, noindex {s.get('noindex')}, canonical {s.get('canonical')}")
PY
