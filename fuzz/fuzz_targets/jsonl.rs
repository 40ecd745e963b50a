//! JSONL ingest (`rankd ingest --format jsonl` and admin document batches parse the same way):
//! any bytes give documents or errors naming a line, never a panic; a document that parses
//! also converts into the index's form.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|&b| b == b'\n').count();
    for record in rankd::corpus::jsonl::parse(std::path::Path::new("fuzz.jsonl"), data) {
        if let Err(e) = record {
            let line = e.line.expect("an error names its line");
            assert!(line >= 1 && line <= lines, "line {line} of {lines}");
        }
    }
});
