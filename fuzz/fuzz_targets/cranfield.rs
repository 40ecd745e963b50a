//! The Cranfield readers (`cran.all.1400`, `cran.qry`, `cranqrel`): any file is parsed or
//! refused with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankd::corpus::cranfield::{self, Judgments};

fuzz_target!(|data: &[u8]| {
    let path = rankd_fuzz::scratch_file("cran", data);
    let _ = cranfield::read_documents(&path);
    let _ = cranfield::read_queries(&path);
    let _ = cranfield::read_qrels(&path, Judgments::A);
    let _ = cranfield::read_qrels(&path, Judgments::B);
});
