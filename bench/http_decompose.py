"""Where the HTTP overhead of `/search` goes: for the 600 Rust-docs queries (BM25, k = 10) on one
keep-alive connection, the mean per request of the client's round trip, the server's handler
time as its Prometheus middleware measures it (`rankd_http_request_duration_seconds`), the
search's retrieve phase (`rankd_search_phase_duration_seconds`) and `took_ms`.

    python3 bench/http_decompose.py 127.0.0.1:PORT     # against `rankd serve` without a reranker
"""
import http.client, json, time, urllib.parse, sys, re
host, port = sys.argv[1].split(':')
def metrics():
    c = http.client.HTTPConnection(host, int(port)); c.request('GET', '/metrics'); t = c.getresponse().read().decode()
    def val(pat):
        m = re.search(pat + r' ([0-9.e+-]+)', t); return float(m.group(1))
    return (val(r'rankd_http_request_duration_seconds_sum\{method="GET",route="/search"\}'),
            val(r'rankd_http_request_duration_seconds_count\{method="GET",route="/search"\}'),
            val(r'rankd_search_phase_duration_seconds_sum\{phase="retrieve"\}'))
qs = [l.strip() for l in open('bench/queries/rust-docs.txt') if l.strip()]
c = http.client.HTTPConnection(host, int(port))
for q in qs[:20]:  # warm-up; also creates the /search series in /metrics
    c.request('GET', '/search?' + urllib.parse.urlencode({'q': q, 'k': 10, 'model': 'bm25'})); c.getresponse().read()
a = metrics(); took = 0; client = 0
for q in qs:
    path = '/search?' + urllib.parse.urlencode({'q': q, 'k': 10, 'model': 'bm25'})
    t = time.perf_counter(); c.request('GET', path); body = c.getresponse().read(); client += time.perf_counter() - t
    took += json.loads(body)['took_ms'] / 1e3
b = metrics(); n = b[1] - a[1]
print('per request (mean, ms): client %.3f | handler (middleware-timed) %.3f | retrieve phase %.3f | took_ms %.3f' % (client/len(qs)*1e3, (b[0]-a[0])/n*1e3, (b[2]-a[2])/n*1e3, took/len(qs)*1e3))
