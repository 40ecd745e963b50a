#!/usr/bin/env python3
"""Writes tests/fixtures/gbdt/ranklib_public.*: a RankLib LambdaMART model from a public
repository, rows that probe it, and RankLib's own scores of those rows, for the test
`public_ranklib_model_scores_as_ranklib` in tests/suite/gbdt_import.rs (which needs no Java).

Provenance
----------
- Model: ranklib_public.xml is models/solr_lambdamart_model.txt of the GitHub repository
  sujitpal/ltr-examples at commit 76d999e14507bc4ad8b7bac3e8a1b8736fc1098b (2018-10-07, "changes
  made for v2 presentation"; unchanged up to at least 811677a), byte for byte: git blob
  38096f14103fd111f44cd1145171223b53169ff1, checked below. Trained by that repository's
  scripts/solr_train_lambdamart.sh with RankLib-2.10.jar (`-ranker 6 -metric2t NDCG@10`, no
  `-norm`): 103 trees of up to 10 leaves, weight 0.1, feature ids 1..25.
- RankLib: compiled here from source, the Lemur project's RankLib trunk (2.10-SNAPSHOT) as
  imported verbatim into the GitHub repository codelibs/ranklib at commit
  6f3752f2124ce10f46a0511298573562a6ef79e2 (2018-06-18, "import from
  https://svn.code.sf.net/p/lemur/code/RankLib/trunk"), before that fork's own changes. Its
  only dependency, Apache commons-math3, is Debian's libcommons-math3-java (3.6.1). A released
  RankLib jar (e.g. RankLib-2.10.jar) can be given instead with --ranklib-jar.
- Scores: RankLib's own command line, `java ciir.umass.edu.eval.Evaluator -load
  ranklib_public.xml -rank ranklib_public.svm -score OUT -missingZero`. OUT's third column is
  `Ranker.eval(DataPoint)`: Ensemble.eval sums `tree.eval(dp) * weight` into a Java `float`
  (each product exact in `double`, each running sum rounded to `float`); a split goes left iff
  `dp.getFeatureValue(fid) <= threshold` (Java floats).

Missing features: RankLib's DenseDataPoint reads a feature absent from an SVMlight line as 0
(ids between the line's own smallest and largest; ids past the line's last one throw unless
`-missingZero`, which this script passes, and then read as 0 too). So a feature absent from
ranklib_public.svm is 0.0 in ranklib_public.rows.tsv. (A value written as `NaN` also reads as
0 in RankLib, since DenseDataPoint takes NaN for "unknown"; rankd's importer does the same,
and the test checks it on RankLib's score of one row with NaN features: 0.40703660249710083,
as with those features absent. No row of the fixture has a NaN.)

Files written (the rows are deterministic: a fixed seed):

    ranklib_public.svm         the rows as RankLib read them (SVMlight; absent = missing)
    ranklib_public.rows.tsv    the same rows dense, 25 float32 columns (feature id i in
                               column i-1), tab-separated, shortest float32 repr
    ranklib_public.scores.txt  RankLib's score of each row, as Java printed the double

Usage (needs javac/java >= 8; Debian: openjdk-17-jdk-headless, libcommons-math3-java):

    python3 bench/gbdt_ranklib_fixture.py --ranklib PATH   # a clone (or bare git dir) of
                                                           # codelibs/ranklib, or a tree
                                                           # holding src/ciir/umass/edu/...
    python3 bench/gbdt_ranklib_fixture.py --ranklib-jar RankLib-2.10.jar
    python3 bench/gbdt_ranklib_fixture.py --rows-only      # rewrite .svm/.rows.tsv only
"""
import argparse
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gbdt")
MODEL = os.path.join(OUT, "ranklib_public.xml")
MODEL_BLOB = "38096f14103fd111f44cd1145171223b53169ff1"
RANKLIB_COMMIT = "6f3752f2124ce10f46a0511298573562a6ef79e2"
COMMONS_MATH3 = "/usr/share/java/commons-math3.jar"
WIDTH = 25  # the model's largest feature id
SEED = 15


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def next_up(x):
    """The next float32 above float32 x (x finite)."""
    if x == 0.0:
        return from_bits(1)
    b = f32_bits(x)
    return from_bits(b + 1 if x > 0 else b - 1)


def next_down(x):
    return -next_up(-x)


def shortest(x):
    """The shortest decimal that reads back (round to nearest) as float32 x."""
    if x == 0.0:
        return "-0.0" if struct.pack("<f", x)[3] & 0x80 else "0.0"
    for p in range(1, 10):
        s = "%.*g" % (p, x)
        if f32(float(s)) == x:
            return s
    raise AssertionError(x)


def model_splits(text):
    """{feature id: sorted distinct float32 thresholds} of the model's splits."""
    pairs = re.findall(
        r"<feature>\s*(\d+)\s*</feature>\s*<threshold>\s*(\S+)\s*</threshold>", text
    )
    out = {}
    for fid, t in pairs:
        out.setdefault(int(fid), set()).add(f32(float(t)))
    return {f: sorted(v) for f, v in out.items()}


def make_rows(splits):
    """Rows as lists of WIDTH entries: a float32 value, or None for 'absent from the line'."""
    rng = random.Random(SEED)
    used = sorted(splits)
    lo = {f: min(splits[f]) for f in used}
    hi = {f: max(splits[f]) for f in used}

    def typical(f):
        """A value for feature id f: a threshold ±1 step, zero, or a value in its range."""
        if f not in splits:
            return f32(rng.uniform(0, 5))
        ts = splits[f]
        r = rng.random()
        if r < 0.25:
            return rng.choice([lambda t: t, next_down, next_up])(rng.choice(ts))
        if r < 0.4:
            return 0.0
        if ts == [0.0]:  # an indicator-like feature: split at 0
            return f32(rng.choice([1.0, 2.0, rng.uniform(0, 3), -rng.uniform(0, 1)]))
        span = (hi[f] - lo[f]) or 1.0
        return f32(rng.uniform(lo[f] - 0.2 * span, hi[f] + 0.2 * span))

    rows = []
    # 1. Every threshold of every feature exactly, one float32 step below and above: row (k, o)
    #    puts feature f on threshold k mod n_f with offset (o + f) mod 3, so each (threshold,
    #    offset) pair occurs and the offsets of the features vary within a row.
    sweep = max(len(ts) for ts in splits.values())
    offsets = [lambda t: t, next_down, next_up]
    for k in range(sweep):
        for o in range(3):
            row = []
            for f in range(1, WIDTH + 1):
                if f in splits:
                    ts = splits[f]
                    row.append(offsets[(o + f) % 3](ts[k % len(ts)]))
                else:
                    row.append(typical(f))
            rows.append(row)
    # 2. Zeros and missing features.
    rows.append([None] * WIDTH)  # an empty line: every feature absent
    rows.append([0.0] * WIDTH)
    rows.append([-0.0] * WIDTH)
    for cut in (1, 5, 6, 12, 20, 24):  # ids past `cut` absent (read as 0 with -missingZero)
        rows.append([typical(f) if f <= cut else None for f in range(1, WIDTH + 1)])
    for f in used:  # one feature absent, the others typical
        row = [typical(g) for g in range(1, WIDTH + 1)]
        row[f - 1] = None
        rows.append(row)
        row = list(row)
        row[f - 1] = rng.choice([0.0, -0.0])  # the same row with an explicit zero
        rows.append(row)
    for _ in range(40):  # random rows, a third of the features absent
        rows.append(
            [None if rng.random() < 0.33 else typical(f) for f in range(1, WIDTH + 1)]
        )
    # 3. Random rows, every feature present.
    for _ in range(40):
        rows.append([typical(f) for f in range(1, WIDTH + 1)])
    return rows


def write_rows(rows):
    with open(os.path.join(OUT, "ranklib_public.svm"), "w") as svm, open(
        os.path.join(OUT, "ranklib_public.rows.tsv"), "w"
    ) as tsv:
        for i, row in enumerate(rows):
            feats = " ".join(
                "%d:%s" % (f + 1, shortest(v)) for f, v in enumerate(row) if v is not None
            )
            svm.write(("0 qid:%d %s" % (i + 1, feats)).rstrip() + "\n")
            tsv.write("\t".join(shortest(0.0 if v is None else v) for v in row) + "\n")


def ranklib_classpath(args, work):
    if args.ranklib_jar:
        return args.ranklib_jar
    src = args.ranklib
    tree = os.path.join(work, "ranklib")
    if os.path.isdir(os.path.join(src, "src", "ciir")):
        shutil.copytree(os.path.join(src, "src"), os.path.join(tree, "src"))
    else:  # a git repository: the pinned commit's src/
        git_dir = src if os.path.isdir(os.path.join(src, "objects")) else os.path.join(src, ".git")
        os.makedirs(tree)
        archive = subprocess.run(
            ["git", "--git-dir", git_dir, "archive", RANKLIB_COMMIT, "src"],
            check=True,
            stdout=subprocess.PIPE,
        ).stdout
        subprocess.run(["tar", "x", "-C", tree], input=archive, check=True)
    if not os.path.exists(COMMONS_MATH3):
        sys.exit(f"{COMMONS_MATH3} missing: apt-get install libcommons-math3-java")
    classes = os.path.join(work, "classes")
    subprocess.run(
        ["javac", "--release", "8", "-nowarn", "-encoding", "UTF-8", "-cp", COMMONS_MATH3,
         "-sourcepath", os.path.join(tree, "src"), "-d", classes,
         os.path.join(tree, "src", "ciir", "umass", "edu", "eval", "Evaluator.java")],
        check=True,
    )
    return classes + os.pathsep + COMMONS_MATH3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranklib", help="codelibs/ranklib clone or git dir, or a RankLib source tree")
    ap.add_argument("--ranklib-jar", help="a RankLib jar instead of the source")
    ap.add_argument("--rows-only", action="store_true")
    args = ap.parse_args()
    if not args.rows_only and not (args.ranklib or args.ranklib_jar):
        ap.error("give --ranklib or --ranklib-jar (or --rows-only)")

    data = open(MODEL, "rb").read()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    if blob != MODEL_BLOB:
        sys.exit(f"{MODEL}: git blob {blob}, expected {MODEL_BLOB} (the public file)")
    splits = model_splits(data.decode())
    assert max(splits) == WIDTH, max(splits)
    rows = make_rows(splits)
    write_rows(rows)
    print(f"{len(rows)} rows", file=sys.stderr)
    if args.rows_only:
        return

    with tempfile.TemporaryDirectory() as work:
        cp = ranklib_classpath(args, work)
        out = os.path.join(work, "scores.txt")
        subprocess.run(
            ["java", "-cp", cp, "ciir.umass.edu.eval.Evaluator", "-load", MODEL,
             "-rank", os.path.join(OUT, "ranklib_public.svm"), "-score", out, "-missingZero"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        lines = [l.split("\t") for l in open(out).read().splitlines() if l]
    assert len(lines) == len(rows), (len(lines), len(rows))
    with open(os.path.join(OUT, "ranklib_public.scores.txt"), "w") as f:
        for i, (qid, j, score) in enumerate(lines):
            assert (qid, j) == (str(i + 1), "0"), (i, qid, j)  # one row per query, in order
            f.write(score + "\n")
    print(f"wrote {OUT}/ranklib_public.{{svm,rows.tsv,scores.txt}}", file=sys.stderr)


if __name__ == "__main__":
    main()
