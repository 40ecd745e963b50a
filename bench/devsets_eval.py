#!/usr/bin/env python3
"""Scores rankd on the development sets of bench/devsets/: MRR@10, nDCG@10 and recall@100 per
set, for the first phase (BM25F) and the default search (the first phase's top 100 reranked by
the active model).

    python3 bench/devsets_eval.py --data-dir DIR [--rankd BIN]   # through `rankd eval`
    python3 bench/devsets_eval.py --server http://127.0.0.1:8080  # through GET /search

With --data-dir, `rankd eval` runs each set (`--model bm25f --depth 100`, then `--rerank` with
the active model, from DIR/models/ACTIVE or DIR/rankd.db, and `--window 100`) and reports nDCG@10 and recall@100;
MRR@10 is computed here from the run it writes (rankd reports MRR without a cutoff), and the
other two are recomputed from the run as a check. With --server, each query is sent to
`/search?k=100&snippets=false`, with `rerank=false` for the first phase, and all three metrics
are computed here. nDCG uses linear gain (trec_eval's ndcg_cut, rankd eval's default), so a
grade-2 page counts twice a grade-1 page; MRR and recall count every judged page as relevant.

Standard library only.
"""

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = {
    "items": "item names as users type them",
    "questions": "natural-language questions",
}
DEPTH = 100


def read_topics(path):
    topics = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                qid, text = line.rstrip("\n").split(maxsplit=1)
                topics.append((qid, text.strip()))
    return topics


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                qid, _, doc, grade = line.split()
                qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


def read_run(path):
    """A TREC run, each query's documents ordered as trec_eval and `rankd eval` order them:
    by score, ties by document id, both descending."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            qid, _, doc, _, score, _ = line.split()
            rows.setdefault(qid, []).append((float(score), doc))
    return {qid: [d for _, d in sorted(r, reverse=True)] for qid, r in rows.items()}


def metrics(ranking, judged):
    """MRR@10, nDCG@10 (linear gain) and recall@100 of one ranking."""
    relevant = {d for d, g in judged.items() if g > 0}
    rr = next((1.0 / (i + 1) for i, d in enumerate(ranking[:10]) if d in relevant), 0.0)
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    recall = len(relevant & set(ranking[:DEPTH])) / len(relevant)
    return {"mrr@10": rr, "ndcg@10": dcg / idcg, "recall@100": recall}


def mean_metrics(runs, qrels):
    """Means over the judged queries; a judged query missing from the run scores 0."""
    per_query = {q: metrics(runs.get(q, []), qrels[q]) for q in qrels if any(g > 0 for g in qrels[q].values())}
    names = ("mrr@10", "ndcg@10", "recall@100")
    return {n: sum(m[n] for m in per_query.values()) / len(per_query) for n in names}, per_query


def eval_data_dir(args, name, topics_path, qrels_path, rerank):
    """One `rankd eval` of one set; returns (means, per-query metrics, run)."""
    qrels = read_qrels(qrels_path)
    with tempfile.TemporaryDirectory() as tmp:
        run_path = os.path.join(tmp, "run")
        cmd = [args.rankd, "eval", "--data-dir", args.data_dir, "--queries", topics_path,
               "--qrels", qrels_path, "--model", args.model, "--depth", str(DEPTH),
               "--run", run_path, "--json"]
        if rerank:
            cmd += ["--rerank", rerank, "--window", str(DEPTH)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
        report = json.loads(out.stdout)
        run = read_run(run_path)
    means, per_query = mean_metrics(run, qrels)
    for n in ("ndcg@10", "recall@100"):
        if abs(report[n] - means[n]) > 1e-6:
            print(f"warning: {name}: rankd eval's {n} {report[n]:.4f} differs from the run's "
                  f"{means[n]:.4f}", file=sys.stderr)
        means[n] = report[n]
    if report.get("failed_queries"):
        print(f"warning: {name}: {len(report['failed_queries'])} queries failed", file=sys.stderr)
    return means, per_query, run


def eval_server(args, topics_path, qrels_path, rerank):
    qrels = read_qrels(qrels_path)
    run = {}
    for qid, text in read_topics(topics_path):
        params = {"q": text, "k": DEPTH, "snippets": "false"}
        if not rerank:
            params["rerank"] = "false"
        url = args.server.rstrip("/") + "/search?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url) as response:
            hits = json.load(response)["hits"]
        run[qid] = [h["id"] for h in hits]
    means, per_query = mean_metrics(run, qrels)
    return means, per_query, run


def active_model(data_dir):
    """The active reranker's file: named by models/ACTIVE (what `rankd demo` and `rankd train`
    write), or, once `rankd serve` has taken the models into its registry, by rankd.db."""
    path = os.path.join(data_dir, "models", "ACTIVE")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return os.path.join(data_dir, "models", f.read().strip())
    db = os.path.join(data_dir, "rankd.db")
    if os.path.exists(db):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            row = c.execute("SELECT file_path FROM models WHERE status = 'active'").fetchone()
        if row:
            return row[0]
    sys.exit(f"no active reranker in {data_dir} (neither models/ACTIVE nor an active model in "
             "rankd.db): build the demo, or train one")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", help="a rankd data directory (the demo's: ./data)")
    where.add_argument("--server", help="a running rankd's base URL")
    ap.add_argument("--rankd", default="rankd", help="the rankd binary (with --data-dir)")
    ap.add_argument("--model", default="bm25f", help="the first phase (with --data-dir)")
    ap.add_argument("--sets", default=os.path.join(HERE, "devsets"), help="the sets' directory")
    ap.add_argument("--per-query", metavar="DIR", help="also write each run and per-query metrics here")
    args = ap.parse_args()
    rerank = active_model(args.data_dir) if args.data_dir else True

    print(f"{'set':<10} {'queries':>7}  {'search':<26} {'MRR@10':>7} {'nDCG@10':>8} {'R@100':>7}")
    for name in SETS:
        topics = os.path.join(args.sets, f"{name}.topics")
        qrels = os.path.join(args.sets, f"{name}.qrels")
        first = f"first phase ({args.model})" if args.data_dir else "first phase (rerank=false)"
        for label, rr in ((first, None), ("default (reranked)", rerank)):
            if args.data_dir:
                means, per_query, run = eval_data_dir(args, name, topics, qrels, rr)
            else:
                means, per_query, run = eval_server(args, topics, qrels, rr)
            print(f"{name:<10} {len(per_query):>7}  {label:<26} {means['mrr@10']:>7.3f} "
                  f"{means['ndcg@10']:>8.3f} {means['recall@100']:>7.3f}")
            if args.per_query:
                os.makedirs(args.per_query, exist_ok=True)
                tag = f"{name}.{'reranked' if rr else 'first'}"
                with open(os.path.join(args.per_query, tag + ".run"), "w") as f:
                    for qid, docs in sorted(run.items()):
                        f.writelines(f"{qid} Q0 {d} {i + 1} {-i} {tag}\n" for i, d in enumerate(docs))
                with open(os.path.join(args.per_query, tag + ".tsv"), "w") as f:
                    f.write("qid\tmrr@10\tndcg@10\trecall@100\n")
                    for qid, m in sorted(per_query.items()):
                        f.write(f"{qid}\t{m['mrr@10']:.4f}\t{m['ndcg@10']:.4f}\t{m['recall@100']:.4f}\n")


if __name__ == "__main__":
    main()
