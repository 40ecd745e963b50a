#!/usr/bin/env python3
"""The bm25s peer of the text-core benchmark (docs/BENCHMARKS.md, issue 2).

Indexes the text rankd stored (JSONL from `examples/export_text.rs`) with bm25s, the way rankd's
`all` field holds it (title, headings, body, anchor, url), then times every query of the fixed
set, top 10, one at a time on one thread. Analysis mirrors rankd's `en_stem` as far as bm25s
allows: alphanumeric runs (rankd's tokenizer splits `from_utf8` into `from`, `utf8`), lower
case, English stop words, Snowball English stemmer (PyStemmer). BM25 "lucene", k1=1.2, b=0.75,
as rankd's tantivy BM25.

Prints JSON on stdout: index time (wall and CPU), p50/p99/mean per query (median over passes)
and, when `--rankd-top` is given (JSONL `{"q", "ids"}`), the mean overlap of the two top 10s:
a check that both rank the same text with the same formula.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

# Single-threaded numpy, set before numpy loads.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import bm25s  # noqa: E402
import Stemmer  # noqa: E402

TOKEN_PATTERN = r"(?u)[^\W_]+"


def percentile(samples, p):
    """Nearest-rank percentile, as examples/query_latency.rs."""
    s = sorted(samples)
    rank = max(1, min(len(s), math.ceil(p * len(s))))
    return s[rank - 1]


def tokenize(texts, stemmer):
    return bm25s.tokenize(texts, token_pattern=TOKEN_PATTERN, stopwords="en", stemmer=stemmer,
                          return_ids=False, show_progress=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", required=True, help="JSONL from examples/export_text.rs")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--index-runs", type=int, default=2, help="index builds timed (median)")
    ap.add_argument("--rankd-top", help="JSONL of rankd's bm25 top 10 per query")
    args = ap.parse_args()
    if args.passes < 1 or args.index_runs < 1:
        sys.exit("--passes and --index-runs must be at least 1")

    ids, texts = [], []
    with open(args.docs, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            ids.append(d["id"])
            texts.append("\n".join(d[f] for f in ("title", "headings", "body", "anchor", "url")))
    with open(args.queries, encoding="utf-8") as fh:
        queries = [q.strip() for q in fh if q.strip()]
    if not texts or not queries:
        sys.exit("no documents or no queries")
    input_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6

    stemmer = Stemmer.Stemmer("english")
    walls, cpus = [], []
    for _ in range(args.index_runs):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        corpus_tokens = bm25s.tokenize(texts, token_pattern=TOKEN_PATTERN, stopwords="en",
                                       stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        retriever.index(corpus_tokens, show_progress=False)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
        del corpus_tokens
    index_wall, index_cpu = statistics.median(walls), statistics.median(cpus)

    def search(q):
        tokens = tokenize([q], stemmer)
        if not any(t in retriever.vocab_dict for t in tokens[0]):
            return []  # nothing to rank: rankd returns no hits either
        docs, scores = retriever.retrieve(tokens, k=10, show_progress=False, n_threads=1)
        return [ids[d] for d, s in zip(docs[0], scores[0]) if s > 0]

    tops = {q: search(q) for q in queries}  # warm-up and the results to compare
    pass_p50, pass_p99, pass_mean = [], [], []
    for _ in range(args.passes):
        times = []
        for q in queries:
            t0 = time.perf_counter()
            search(q)
            times.append((time.perf_counter() - t0) * 1e3)
        pass_p50.append(percentile(times, 0.5))
        pass_p99.append(percentile(times, 0.99))
        pass_mean.append(sum(times) / len(times))

    out = {
        "documents": len(texts),
        "text_mb": input_mb,
        "index_wall_s": index_wall,
        "index_cpu_s": index_cpu,
        "queries": len(queries),
        "passes": args.passes,
        "p50_ms": statistics.median(pass_p50),
        "p99_ms": statistics.median(pass_p99),
        "mean_ms": statistics.median(pass_mean),
        "pass_p50_ms": pass_p50,
        "bm25s_version": bm25s.__version__,
    }
    if args.rankd_top:
        overlaps = []
        with open(args.rankd_top, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                a, b = set(r["ids"]), set(tops.get(r["q"], []))
                if a or b:
                    overlaps.append(len(a & b) / max(len(a), len(b)))
        out["top10_overlap_mean"] = statistics.mean(overlaps) if overlaps else None
        out["top10_overlap_queries"] = len(overlaps)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
