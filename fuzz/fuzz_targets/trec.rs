//! TREC run and qrels readers (`rankd eval`, `POST /admin/judgments/qrels`): any text is
//! parsed or refused with an error naming its line, never a panic; a run that parses writes
//! back and reads again to the same run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankd::eval::trec;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.trec");
    if let Ok(run) = trec::parse_run(data, path) {
        let mut text = Vec::new();
        trec::write_run(&mut text, &run, "fuzz").unwrap();
        let again = trec::parse_run(&text[..], path).expect("a written run reads back");
        assert_eq!(again.num_queries(), run.num_queries());
    }
    if let Ok(qrels) = trec::parse_qrels(data, path) {
        let mut text = Vec::new();
        trec::write_qrels(&mut text, &qrels).unwrap();
        let again = trec::parse_qrels(&text[..], path).expect("written qrels read back");
        assert_eq!(again.num_judgments(), qrels.num_judgments());
    }
});
