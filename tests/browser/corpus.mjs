// A small linked corpus for the browser test: ten topics, three pages each (an overview, a
// tutorial and a reference page), linked within the topic and to the neighbouring topics.
// The judgments prefer the overview (grade 2) to the tutorial (1) to the reference page (0),
// while the text favours the reference page, which repeats the topic's words: the first phase
// gets the order wrong and a reranker has something to learn (from the link scores, which
// favour the overviews, and the URL).

const TOPICS = [
  ["vec", "Vec growable array", "contiguous growable array type with heap allocated contents, push and pop at the end, capacity and length"],
  ["hashmap", "HashMap hash table", "hash map storing key value pairs with hashing, insert get remove, entry API for in-place updates"],
  ["iterator", "Iterator trait", "iterator yields a sequence of values lazily; adapters map filter fold collect and zip chain them"],
  ["string", "String text buffer", "owned UTF-8 encoded growable string; push_str, format macro, slicing into str by byte ranges"],
  ["option", "Option optional value", "optional value that is either Some containing a value or None; unwrap map and_then ok_or"],
  ["result", "Result error handling", "result type for recoverable errors, Ok or Err, the question mark operator propagates errors"],
  ["thread", "Threads and spawning", "spawn operating system threads, join handles, move closures and sending data across threads"],
  ["mutex", "Mutex mutual exclusion", "mutual exclusion lock protecting shared data, lock guard, poisoning when a holder panics"],
  ["channel", "Channels message passing", "multi producer single consumer channel, sender and receiver, send recv between threads"],
  ["file", "File input output", "open create read and write files on the file system, buffered readers and writers, paths"],
];

const KINDS = [
  ["overview", "overview of", "This page explains the"],
  ["tutorial", "tutorial on", "A step by step tutorial walking through the"],
  ["reference", "reference for", "Reference listing every method of the"],
];

/** The documents, one JSON object per line (rankd ingest --format jsonl). */
export function documents() {
  const docs = [];
  TOPICS.forEach(([key, title, text], t) => {
    const next = TOPICS[(t + 1) % TOPICS.length][0];
    const prev = TOPICS[(t + TOPICS.length - 1) % TOPICS.length][0];
    for (const [kind, phrase, lead] of KINDS) {
      const links = KINDS.filter(([k]) => k !== kind).map(([k]) => `${key}-${k}`);
      // Every page links to the overview of the neighbouring topics; overviews collect
      // the most in-links, as the main page of a topic does on a real site.
      links.push(`${next}-overview`, `${prev}-overview`);
      docs.push({
        id: `${key}-${kind}`,
        url: `https://docs.example.org/${key}/${kind}.html`,
        title: `${title} ${kind}`,
        headings: `${title} ${phrase} ${key}`,
        body: `${lead} ${title}: ${text}. ` +
          (kind === "reference" ? `Methods of ${title}: ${text}. ` : "") +
          (kind === "overview" ? `Start here to learn ${key}. ` : `See the ${key} overview first. `) +
          `Related: ${next} and ${prev}.`,
        links,
      });
    }
  });
  return docs;
}

/** Judgments for the admin API: three queries per topic, each judging the topic's pages. */
export function judgments() {
  const out = [];
  TOPICS.forEach(([key, title, text]) => {
    const words = text.split(/\s+/);
    const queries = [
      [`${key}-q1`, title.toLowerCase()],
      [`${key}-q2`, words.slice(0, 4).join(" ")],
      [`${key}-q3`, `${key} ${words[words.length - 1]}`],
    ];
    for (const [qid, q] of queries) {
      for (const [kind] of KINDS) {
        out.push({
          query_id: qid,
          query: q,
          doc_id: `${key}-${kind}`,
          grade: { overview: 2, tutorial: 1, reference: 0 }[kind],
          source: "browser-test",
        });
      }
    }
  });
  return out;
}
