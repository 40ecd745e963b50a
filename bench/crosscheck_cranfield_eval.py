#!/usr/bin/env python3
"""`rankd eval` end to end against trec_eval (pytrec_eval) on Cranfield.

Ingests Cranfield into a temporary data directory, runs `rankd eval` for every first-phase
model (writing each run file), then scores the same run files with pytrec_eval against the
variant-A qrels written in TREC format (grade = 5 - code for codes 1..4, else 0) and fails on
any mean difference above 1e-4 in map, P@10, ndcg_cut@10 (linear gain) or recip_rank.

Run from the crate root: bench/.venv/bin/python bench/crosscheck_cranfield_eval.py [--release]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytrec_eval

ROOT = Path(__file__).resolve().parent.parent
CRANFIELD = ROOT.parent / "shared" / "data" / "cranfield"
MODELS = ["tfidf", "bm25", "bm25f", "f2exp", "lm", "bm25prox"]
MEASURES = {"map": "map", "p@10": "P_10", "ndcg@10": "ndcg_cut_10", "mrr": "recip_rank"}


def rankd(release, *args):
    cmd = ["cargo", "run", "-q"] + (["--release"] if release else []) + ["--", *args]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return out.stdout


def variant_a_qrels():
    qrels = {}
    for line in (CRANFIELD / "cranqrel").read_text().split("\n"):
        parts = line.split()
        if len(parts) != 3:
            continue
        q, d, code = parts[0], parts[1], int(parts[2])
        qrels.setdefault(q, {})[d] = 5 - code if 1 <= code <= 4 else 0
    return qrels


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--release", action="store_true")
    args = ap.parse_args()
    qrels = variant_a_qrels()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        rankd(args.release, "ingest", "--format", "cranfield", "--input", str(CRANFIELD),
              "--data-dir", str(data), "--json")
        for model in MODELS:
            run_path = Path(tmp) / f"{model}.trec"
            report = json.loads(rankd(
                args.release, "eval", "--format", "cranfield",
                "--queries", str(CRANFIELD / "cran.qry"), "--qrels", str(CRANFIELD / "cranqrel"),
                "--model", model, "--field", "body", "--run", str(run_path),
                "--data-dir", str(data), "--json"))
            run = {}
            for line in run_path.read_text().split("\n"):
                if line.strip():
                    q, _, d, _, score, _ = line.split()
                    run.setdefault(q, {})[d] = float(score)
            # rankd scores every query (a query with no hits counts 0): so does trec_eval -c.
            for q in qrels:
                run.setdefault(q, {})
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES.values()))
            per_query = evaluator.evaluate({q: r for q, r in run.items() if r} or run)
            n = len(qrels)
            for ours, theirs in MEASURES.items():
                trec = sum(per_query.get(q, {}).get(theirs, 0.0) for q in qrels) / n
                mine = report[ours]
                ok = abs(trec - mine) <= 1e-4
                failures += not ok
                print(f"{model:9} {ours:8} rankd {mine:.6f} trec_eval {trec:.6f} {'ok' if ok else 'MISMATCH'}")
    if failures:
        print(f"{failures} mismatches")
        sys.exit(1)
    print("rankd eval agrees with trec_eval on every model")


if __name__ == "__main__":
    main()
