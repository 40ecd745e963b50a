//! Dumps the text of every stored document of an index as JSONL, so a peer tool (bm25s in
//! `bench/bm25s_bench.py`) ranks exactly the text rankd indexed, not its own HTML extraction.
//!
//! ```text
//! cargo run --release --example export_text -- --data-dir DIR > docs.jsonl
//! ```
//! One line per live document: `{"id", "title", "headings", "body", "anchor", "url"}`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Parser;
use rankd::text::TextIndex;
use tantivy::{DocAddress, TantivyDocument};

#[derive(Parser)]
#[command(about = "Export the stored text of every document of a rankd index as JSONL")]
struct Args {
    #[arg(long)]
    data_dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let index = TextIndex::open(&args.data_dir, None)?;
    let searcher = index.reader.searcher();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut n = 0u64;
    for (segment_ord, reader) in searcher.segment_readers().iter().enumerate() {
        for doc_id in reader.doc_ids_alive() {
            let doc: TantivyDocument = searcher.doc(DocAddress::new(segment_ord as u32, doc_id))?;
            let d = index.stored(&doc);
            let line = serde_json::json!({
                "id": d.id,
                "title": d.title,
                "headings": d.headings,
                "body": d.body,
                "anchor": d.anchor,
                "url": d.url.unwrap_or_default(),
            });
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
            n += 1;
        }
    }
    out.flush()?;
    eprintln!("exported {n} documents");
    Ok(())
}
