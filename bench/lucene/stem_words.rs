//! Stems words with the Snowball English stemmer rankd uses (tantivy's `Stemmer`, which is the
//! `frostem` crate; setup.sh pins the version found in rankd's Cargo.lock). Reads one word per
//! line on stdin, writes `word TAB stem` per line. bench/lucene/run.sh compares these stems with
//! Lucene's older Snowball English stemmer and hands the differences to LuceneBench as a
//! StemmerOverrideFilter map, so Lucene indexes and queries the same terms as rankd.

use std::io::{BufRead, BufWriter, Write};

fn main() -> std::io::Result<()> {
    let stemmer = frostem::Stemmer::new(frostem::Algorithm::English);
    let stdin = std::io::stdin();
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let word = line?;
        writeln!(out, "{}\t{}", word, stemmer.stem(&word))?;
    }
    out.flush()
}
