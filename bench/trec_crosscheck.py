#!/usr/bin/env python3
"""Cross-check rankd's evaluation metrics against trec_eval (through pytrec_eval).

Two modes:
  trec_crosscheck.py --run RUN --qrels QRELS   score one pair of files
  trec_crosscheck.py                           CI mode: build realistic Cranfield runs
                                               (brute-force BM25, tie-heavy and perturbed
                                               variants) and check them all

rankd's side is `examples/eval_run.rs` (built here with cargo). trec_eval's side is
pytrec_eval (NIST trec_eval 9 compiled in): map, P.5, P.10, recall.10, recall.100,
ndcg_cut.10 and ndcg (linear gain), recip_rank, Rprec, per query and mean. Exponential-gain
NDCG is checked through trec_eval too, by handing it qrels with grades 2^g - 1. ERR@10,
pFound@10 and AUC have no trec_eval measure: they are checked against independent
implementations written below from SPEC §4's definitions, on trec_eval's ordering.
Kendall tau_b and Spearman rho between runs are checked against scipy.

Exits 1 on any difference above 1e-4 or any disagreement on which queries are scored.
Run from the crate root: bench/.venv/bin/python bench/trec_crosscheck.py
"""

import os
import argparse
import json
import math
import random
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytrec_eval
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
CRANFIELD = ROOT.parent / "shared" / "data" / "cranfield"
TOLERANCE = 1e-4

# pytrec_eval measure -> rankd per-query key (the mean key is the same, except ap/rr).
MEASURES = {
    "map": "ap",
    "P_5": "p@5",
    "P_10": "p@10",
    "recall_10": "recall@10",
    "recall_100": "recall@100",
    "ndcg_cut_10": "ndcg@10",
    "ndcg": "ndcg",
    "recip_rank": "rr",
    "Rprec": "r-prec",
}
MEAN_KEY = {"ap": "map", "rr": "mrr"}


# ---------------------------------------------------------------------------------------------
# File formats (written independently of rankd's readers)


def read_run(path):
    run = defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if parts:
            run[parts[0]][parts[2]] = float(parts[4])
    return dict(run)


def read_qrels(path):
    qrels = defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if parts:
            qrels[parts[0]][parts[2]] = int(parts[3])
    return dict(qrels)


def write_run(path, run, tag):
    with open(path, "w") as f:
        for qid, docs in run.items():
            ranked = sorted(docs.items(), key=lambda kv: -kv[1])
            for rank, (doc, score) in enumerate(ranked, 1):
                f.write(f"{qid} Q0 {doc} {rank} {score!r} {tag}\n")


def write_qrels(path, qrels):
    with open(path, "w") as f:
        for qid, docs in qrels.items():
            for doc, grade in docs.items():
                f.write(f"{qid} 0 {doc} {grade}\n")


# ---------------------------------------------------------------------------------------------
# Independent reference implementations for measures trec_eval lacks


def trec_order(docs):
    """trec_eval's order: score as C float descending, then doc id descending (strcmp)."""
    by_doc = sorted(docs.items(), key=lambda kv: kv[0].encode(), reverse=True)
    return [d for d, _ in sorted(by_doc, key=lambda kv: -np.float32(kv[1]))]


def err_pfound(grades, k, g_max, b=0.15):
    err = pfound = 0.0
    for r in range(1, min(k, len(grades)) + 1):
        reach = 1.0
        for j in range(r - 1):
            reach *= 1.0 - stop_probability(grades[j], g_max)
        p = stop_probability(grades[r - 1], g_max)
        err += reach * p / r
        pfound += (1.0 - b) ** (r - 1) * reach * p
    return err, pfound


def stop_probability(grade, g_max):
    g = min(max(grade, 0), g_max)
    return (2.0**g - 1.0) / 2.0**g_max if g_max > 0 else 0.0


def auc(ranked, judged, threshold=1):
    """Pairs (relevant, non-relevant); unretrieved judged docs tie at the bottom."""
    position = {d: i for i, d in enumerate(ranked)}
    bottom = len(ranked)
    docs = [(position[d], judged.get(d, 0) >= threshold) for d in ranked]
    docs += [(bottom, g >= threshold) for d, g in judged.items() if d not in position]
    rel = [p for p, r in docs if r]
    non = [p for p, r in docs if not r]
    if not rel:
        return 0.0
    if not non:
        return 1.0
    good = sum((pr < pn) + 0.5 * (pr == pn) for pr in rel for pn in non)
    return good / (len(rel) * len(non))


# ---------------------------------------------------------------------------------------------
# Comparison


class Checker:
    def __init__(self):
        self.compared = 0
        self.failures = []
        self.max_diff = 0.0

    def value(self, label, ours, theirs):
        self.compared += 1
        diff = abs(ours - theirs)
        self.max_diff = max(self.max_diff, diff)
        if not diff <= TOLERANCE:
            self.failures.append(f"{label}: rankd {ours!r} vs reference {theirs!r}")

    def same(self, label, ours, theirs):
        if ours != theirs:
            self.failures.append(f"{label}: rankd {sorted(ours)[:10]} vs reference {sorted(theirs)[:10]}")


def rankd(binary, *args):
    out = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"eval_run failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def check_pair(binary, run_path, qrels_path, checker, name):
    run, qrels = read_run(run_path), read_qrels(qrels_path)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES))
    ref = evaluator.evaluate(run)
    common = ["--run", run_path, "--qrels", qrels_path, "--json", "--cutoffs", "5,10,100"]

    # 1. trec_eval's own convention: every judged query of the run is scored, linear gain.
    ours = rankd(binary, *common, "--gain", "linear", "--no-relevant", "score")
    checker.same(f"{name}: scored queries", set(ours["per_query"]), set(ref))
    for qid in set(ours["per_query"]) & set(ref):
        for measure, key in MEASURES.items():
            checker.value(f"{name} q{qid} {key}", ours["per_query"][qid][key], ref[qid][measure])
    for measure, key in MEASURES.items():
        mean = sum(v[measure] for v in ref.values()) / len(ref)
        checker.value(f"{name} mean {key}", ours[MEAN_KEY.get(key, key)], mean)

    # 2. SPEC default: queries without a relevant document are left out of the means.
    skip = rankd(binary, *common, "--gain", "linear", "--no-relevant", "skip")
    with_rel = {q for q in ref if any(g >= 1 for g in qrels[q].values())}
    checker.same(f"{name}: queries with relevant docs", set(skip["per_query"]), with_rel)
    for measure, key in MEASURES.items():
        mean = sum(ref[q][measure] for q in with_rel) / len(with_rel)
        checker.value(f"{name} skip-mean {key}", skip[MEAN_KEY.get(key, key)], mean)

    # 3. Exponential gain = trec_eval's linear gain on grades 2^g - 1.
    exp_qrels = {q: {d: (2**g - 1 if g > 0 else g) for d, g in docs.items()} for q, docs in qrels.items()}
    exp_ref = pytrec_eval.RelevanceEvaluator(exp_qrels, {"ndcg_cut_10", "ndcg"}).evaluate(run)
    exp = rankd(binary, *common, "--gain", "exponential", "--no-relevant", "score")
    for qid in set(exp["per_query"]) & set(exp_ref):
        checker.value(f"{name} q{qid} exp ndcg@10", exp["per_query"][qid]["ndcg@10"], exp_ref[qid]["ndcg_cut_10"])
        checker.value(f"{name} q{qid} exp ndcg", exp["per_query"][qid]["ndcg"], exp_ref[qid]["ndcg"])

    # 4. ERR@10, pFound@10, AUC against the reference implementations above.
    g_max = max(g for docs in qrels.values() for g in docs.values())
    for qid in set(ours["per_query"]):
        ranked = trec_order(run[qid])
        grades = [qrels[qid].get(d, 0) for d in ranked]
        err, pfound = err_pfound(grades, 10, g_max)
        checker.value(f"{name} q{qid} err@10", ours["per_query"][qid]["err@10"], err)
        checker.value(f"{name} q{qid} pfound@10", ours["per_query"][qid]["pfound@10"], pfound)
        checker.value(f"{name} q{qid} auc", ours["per_query"][qid]["auc"], auc(ranked, qrels[qid]))
    return len(ref)


def check_correlation(binary, run_a, run_b, checker, name):
    ours = rankd(binary, "--run", run_a, "--qrels", run_a, "--compare", run_b)
    a, b = read_run(run_a), read_run(run_b)
    for qid, docs in a.items():
        if qid not in b:
            continue
        common = [d for d in docs if d in b[qid]]
        q = ours["per_query"][qid]
        checker.value(f"{name} q{qid} common", q["common"], len(common))
        if len(common) < 2:
            continue
        x = [docs[d] for d in common]
        y = [b[qid][d] for d in common]
        for key, ref in (("kendall_tau_b", stats.kendalltau(x, y).statistic), ("spearman_rho", stats.spearmanr(x, y).statistic)):
            if math.isnan(ref):
                if q[key] is not None:
                    checker.failures.append(f"{name} q{qid} {key}: rankd {q[key]} vs scipy undefined")
            elif q[key] is None:
                checker.failures.append(f"{name} q{qid} {key}: rankd undefined vs scipy {ref}")
            else:
                checker.value(f"{name} q{qid} {key}", q[key], ref)


# ---------------------------------------------------------------------------------------------
# Cranfield runs for CI


STOP = set("a an and are as at be by for from has have in is it of on or that the this to was were what with which how can".split())


def tokens(text):
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOP]


def cranfield_documents():
    docs, current, in_abstract = {}, None, False
    for line in (CRANFIELD / "cran.all.1400").read_text().splitlines():
        if line.startswith(".I"):
            current, in_abstract = line.split()[1], False
            docs[current] = []
        elif line.strip() == ".W":
            in_abstract = True
        elif in_abstract and not line.startswith("."):
            docs[current].append(line)
    return {d: tokens(" ".join(lines)) for d, lines in docs.items()}


def cranfield_queries():
    queries, text = [], None
    for line in (CRANFIELD / "cran.qry").read_text().replace("\r", "").splitlines():
        if line.startswith(".I"):
            text = []
            queries.append(text)
        elif line.strip() != ".W":
            text.append(line)
    return {str(i + 1): tokens(" ".join(t)) for i, t in enumerate(queries)}


def bm25_run(docs, queries, depth=1000, k1=1.2, b=0.75):
    """Brute-force BM25 (SPEC §1.3, Lucene idf) over every document."""
    postings = defaultdict(dict)
    for d, toks in docs.items():
        for t, tf in Counter(toks).items():
            postings[t][d] = tf
    n = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n
    run = {}
    for qid, q in queries.items():
        scores = defaultdict(float)
        for t, qtf in Counter(q).items():
            df = len(postings.get(t, {}))
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for d, tf in postings.get(t, {}).items():
                norm = k1 * (1 - b + b * len(docs[d]) / avgdl)
                scores[d] += qtf * idf * tf * (k1 + 1) / (tf + norm)
        top = sorted(scores.items(), key=lambda kv: -kv[1])[:depth]
        run[qid] = {d: round(s, 4) for d, s in top}
    return run


def cranfield_qrels(variant):
    qrels = defaultdict(dict)
    for line in (CRANFIELD / "cranqrel").read_text().splitlines():
        q, d, code = line.split()
        code = int(code)
        qrels[q][d] = (5 - code if 1 <= code <= 4 else 0) if variant == "A" else 1
    return dict(qrels)


def perturbed_run(base, qrels, rng):
    """Ties, truncations, missing and extra queries, relevant docs missing from the run."""
    run = {}
    for i, (qid, docs) in enumerate(base.items()):
        if i % 11 == 3:
            continue  # query missing from the run: trec_eval skips it
        ranked = list(docs.items())[:200]
        if i % 7 == 0:  # no relevant document retrieved
            ranked = [(d, s) for d, s in ranked if qrels.get(qid, {}).get(d, 0) < 1][:5]
        if i % 5 == 0:  # heavy ties: three score levels
            ranked = [(d, float(rng.randrange(3))) for d, _ in ranked]
        elif i % 5 == 1:  # noise
            ranked = [(d, round(s + rng.gauss(0, 1.0), 2)) for d, s in ranked]
        run[qid] = dict(ranked)
    # Scores equal as f32 but not as f64: trec_eval ties them and orders by doc id.
    run["2"] = {"12": 1.00000001, "100": 1.00000002, "13": 1.00000003, "9": 0.5}
    run["999"] = {"1": 1.0}  # not judged: ignored
    return run


def ci(binary, out_dir):
    rng = random.Random(20240501)
    docs, queries = cranfield_documents(), cranfield_queries()
    bm25 = bm25_run(docs, queries)
    coarse = {q: {d: float(round(s)) for d, s in list(ds.items())[:100]} for q, ds in bm25.items()}
    checker = Checker()
    for variant in ("A", "B"):
        qrels = cranfield_qrels(variant)
        # A judged query with no relevant document (trec_eval scores it 0; SPEC skips it).
        qrels["226"] = {"1": 0, "2": 0} if variant == "A" else {}
        qrels = {q: d for q, d in qrels.items() if d}
        qrels_path = out_dir / f"cranqrel.{variant}.qrels"
        write_qrels(qrels_path, qrels)
        runs = {
            "bm25": dict(bm25, **{"226": bm25["1"]}),
            "bm25-coarse": coarse,
            "perturbed": perturbed_run(bm25, qrels, rng),
        }
        for name, run in runs.items():
            run_path = out_dir / f"{name}.{variant}.trec"
            write_run(run_path, run, name)
            n = check_pair(binary, run_path, qrels_path, checker, f"{name}/{variant}")
            print(f"  {name:12s} variant {variant}: {n} queries scored by trec_eval")
    check_correlation(binary, out_dir / "bm25.A.trec", out_dir / "perturbed.A.trec", checker, "bm25~perturbed")
    check_correlation(binary, out_dir / "bm25.A.trec", out_dir / "bm25-coarse.A.trec", checker, "bm25~coarse")
    return checker


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run")
    parser.add_argument("--qrels")
    parser.add_argument("--release", action="store_true", help="build eval_run with --release")
    args = parser.parse_args()
    if bool(args.run) != bool(args.qrels):
        parser.error("--run and --qrels go together")

    profile = ["--release"] if args.release else []
    subprocess.run(["cargo", "build", "--quiet", *profile, "--example", "eval_run"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = target / ("release" if args.release else "debug") / "examples" / "eval_run"

    if args.run:
        checker = Checker()
        check_pair(binary, args.run, args.qrels, checker, Path(args.run).name)
    else:
        with tempfile.TemporaryDirectory(prefix="trec_crosscheck_") as tmp:
            checker = ci(binary, Path(tmp))

    print(f"compared {checker.compared} values, max |difference| {checker.max_diff:.2e}")
    if checker.failures:
        print(f"FAILED: {len(checker.failures)} differences above {TOLERANCE} or query-set mismatches:")
        for f in checker.failures[:30]:
            print("  " + f)
        sys.exit(1)
    print("OK: rankd agrees with trec_eval (pytrec_eval) and the reference implementations")


if __name__ == "__main__":
    main()
