#!/usr/bin/env python3
"""Cranfield retrieval quality of every first-phase model, for docs/EVALUATION.md.

Ingests Cranfield into a temporary data directory, then runs `rankd eval` for every model on
`.W` only (field `body`) and on title + abstract (field `all`; BM25F always reads the fields
separately), under judgment variants A and B, and prints a Markdown table. With --tune-bm25f
it also grid-searches the BM25F title/body weights and b on odd-numbered queries, and reports
the chosen setting on the even-numbered (held-out) queries and on all queries.

Run from the crate root: python3 bench/cranfield_eval.py [--binary target/release/rankd]
"""

import argparse
import itertools
import json
import re
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRANFIELD = ROOT.parent / "shared" / "data" / "cranfield"
MODELS = ["tfidf", "bm25", "bm25f", "f2exp", "lm", "bm25prox"]


def eval_run(binary, data, model, field, judgments, config=None, run_path=None):
    cmd = [binary, "eval", "--format", "cranfield", "--queries", str(CRANFIELD / "cran.qry"),
           "--qrels", str(CRANFIELD / "cranqrel"), "--cranfield-variant", judgments, "--model", model,
           "--field", field, "--data-dir", str(data), "--json"]
    if config:
        cmd += ["--index-config", str(config)]
    if run_path:
        cmd += ["--run", str(run_path)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def bm25f_config(tmp, title_w, body_w, title_b, body_b):
    text = (ROOT / "index" / "rankd.toml").read_text()
    def setf(text, field, w, b):
        return re.sub(rf"(\[fields\.{field}\][^\[]*?bm25f = )\{{[^}}]*\}}",
                      rf"\g<1>{{ weight = {w}, b = {b} }}", text, flags=re.S)
    text = setf(text, "title", title_w, title_b)
    text = setf(text, "body", body_w, body_b)
    path = Path(tmp) / f"bm25f-{title_w}-{body_w}-{title_b}-{body_b}.toml"
    path.write_text(text)
    return path


def subset_map(report, parity):
    qs = [(int(q), m["ap"]) for q, m in report["per_query"].items()]
    sel = [ap for q, ap in qs if q % 2 == parity]
    return sum(sel) / len(sel)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "rankd"))
    ap.add_argument("--tune-bm25f", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subprocess.run([args.binary, "ingest", "--format", "cranfield", "--input", str(CRANFIELD),
                        "--data-dir", str(data), "--json"], check=True, capture_output=True)
        print("| model | text | judgments | MAP | nDCG@10 | P@10 | MRR |")
        print("|---|---|---|---|---|---|---|")
        for judgments in ["a", "b"]:
            for field, label in [("body", ".W only"), ("all", "title + abstract")]:
                for model in MODELS:
                    if model == "bm25f" and field == "body":
                        continue
                    r = eval_run(args.binary, data, model, field, judgments)
                    text = "title, abstract fields" if model == "bm25f" else label
                    print(f"| {model} | {text} | {judgments.upper()} | {r['map']:.4f} | "
                          f"{r['ndcg@10']:.4f} | {r['p@10']:.4f} | {r['mrr']:.4f} |")
        if args.tune_bm25f:
            best = None
            for tw, bw, tb, bb in itertools.product([1, 2, 3, 5, 8], [1.0], [0.0, 0.3, 0.5, 0.75],
                                                    [0.3, 0.5, 0.75, 0.9]):
                cfg = bm25f_config(tmp, tw, bw, tb, bb)
                r = eval_run(args.binary, data, "bm25f", "all", "a", cfg)
                train = subset_map(r, 1)
                if best is None or train > best[0]:
                    best = (train, (tw, bw, tb, bb), r)
            train, setting, r = best
            print(f"\nBM25F tuned on odd queries: title weight {setting[0]}, body weight "
                  f"{setting[1]}, title b {setting[2]}, body b {setting[3]} (k1 1.2)")
            print(f"MAP odd (tuning) {train:.4f}, even (held out) {subset_map(r, 0):.4f}, "
                  f"all {r['map']:.4f}, nDCG@10 {r['ndcg@10']:.4f}, P@10 {r['p@10']:.4f}, "
                  f"MRR {r['mrr']:.4f}")
            bm25 = eval_run(args.binary, data, "bm25", "all", "a")
            print(f"BM25 over the concatenated title + abstract: MAP odd {subset_map(bm25, 1):.4f}, "
                  f"even {subset_map(bm25, 0):.4f}, all {bm25['map']:.4f}")


if __name__ == "__main__":
    main()
