//! Query analysis: any text through every analyzer, and the query-text check the API applies
//! first. Neither may panic; analysis of accepted text must not fail.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankd::text::config::Analyzer;
use rankd::text::query::{check_query_text, QueryTerms};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let accepted = check_query_text(text).is_ok();
    for analyzer in [Analyzer::EnStem, Analyzer::En, Analyzer::Plain] {
        let analyzed = QueryTerms::analyze(text, analyzer);
        if accepted {
            if let Ok(terms) = analyzed {
                let _ = terms.len_with_repeats();
            }
        }
    }
});
