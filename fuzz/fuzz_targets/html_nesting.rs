//! HTML nesting (issue 30, N4): the input is a program of runs, two bytes each — a tag
//! chosen from elements that nest differently in the HTML tree builder (block, inline,
//! formatting, table, list, `p`) and a run length of up to 64 × 255 — expanded into a page of
//! deeply nested, mis-nested and unclosed elements, read as `rankd ingest --format html`
//! reads a directory. No panic, no stack overflow, and the page is a document or an invalid
//! record naming its depth. Run with `-timeout=10`: the reader must stay near-linear.
#![no_main]

use libfuzzer_sys::fuzz_target;

const TAGS: &[&str] = &[
    "<div>",
    "<span>",
    "<b>",
    "<i>",
    "<a href=x>",
    "<p>",
    "<li>",
    "<table>",
    "<td>",
    "<tr>",
    "<ul>",
    "<svg>",
    "<math>",
    "<nav>",
    "</div>",
    "</b>",
    "</p>",
    "</span>",
    "text ",
];

fuzz_target!(|data: &[u8]| {
    let mut page = String::from("<html><body>");
    for run in data.chunks(2) {
        let tag = TAGS[usize::from(run[0]) % TAGS.len()];
        let times = 1 + 64 * usize::from(run.get(1).copied().unwrap_or(0));
        if page.len() + tag.len() * times > 4 << 20 {
            break;
        }
        page.push_str(&tag.repeat(times));
    }
    let dir = rankd_fuzz::scratch().join("nest");
    let files = [rankd_fuzz::scratch_file("nest/index.html", page.as_bytes())];
    let base = url::Url::parse("https://example.org/").unwrap();
    let corpus = rankd::corpus::html::read_pages(&dir, &files, &base, Default::default(), &|| {});
    assert_eq!(corpus.documents.len() + corpus.errors.len(), 1);
    if let Some(e) = corpus.errors.first() {
        assert!(e.message.contains("nest"), "{}", e.message);
    }
});
