#!/usr/bin/env python3
"""Dense and hybrid /search latency over HTTP (docs/BENCHMARKS.md, "Dense and hybrid search"):
the questions of bench/devsets/questions.topics, 3 rounds, one connection, against a server
on 127.0.0.1:18090 (`rankd serve --data-dir D --addr 127.0.0.1:18090`). Prints took_ms and
wall-clock p50/p99 per kind of search."""
import json
import os
import statistics
import time
import urllib.parse
import urllib.request

TOPICS = os.path.join(os.path.dirname(__file__), 'devsets', 'questions.topics')
qs = [l.rstrip('\n').split('\t', 1)[1] for l in open(TOPICS)]
def run(params):
    t=[];w=[]
    for rnd in range(3):
        for q in qs:
            p=dict(params); p['q']=q
            s=time.perf_counter()
            b=json.load(urllib.request.urlopen('http://127.0.0.1:18090/search?'+urllib.parse.urlencode(p)))
            w.append((time.perf_counter()-s)*1e3); t.append(b['took_ms'])
    t.sort(); w.sort()
    return f"took p50 {statistics.median(t):.2f} p99 {t[int(len(t)*.99)]:.2f} | wall p50 {statistics.median(w):.2f} p99 {w[int(len(w)*.99)]:.2f}"
for name,p in [("bm25f first phase",{"model":"bm25f","rerank":"false"}),("default (bm25f + rerank)",{}),("dense",{"model":"dense","rerank":"false"}),("hybrid rrf",{"model":"hybrid","rerank":"false"}),("hybrid rrf + rerank",{"model":"hybrid"})]:
    print(name, run(p))
