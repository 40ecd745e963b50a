//! HTML ingest: the input is split at the first NUL byte into two pages, `index.html` and
//! `b/page.html` (so links, anchors and redirects between them are exercised), read the way
//! `rankd ingest --format html` reads a directory. No panic, whatever the markup.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (first, second) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let dir = rankd_fuzz::scratch().join("site");
    let files = [
        rankd_fuzz::scratch_file("site/index.html", first),
        rankd_fuzz::scratch_file("site/b/page.html", second),
    ];
    let base = url::Url::parse("https://example.org/docs/").unwrap();
    let corpus = rankd::corpus::html::read_pages(&dir, &files, &base, Default::default(), &|| {});
    assert!(corpus.documents.len() + corpus.errors.len() + corpus.redirects <= 2);
});
