//! Model files in every format rankd reads: rankd JSON, XGBoost JSON, LightGBM text and
//! RankLib XML, through each reader and through `POST /admin/models`'s upload check (format
//! detection, validation, binding to the feature set). No panic; a model that is accepted
//! scores a row of the current feature set with finite scores and explains it (TreeSHAP for
//! trees, which `explain=true` runs).
//!
//! An input opening with `DEEP` is a program instead (issue 30, N1/N2): a depth (two bytes,
//! up to 65 535) and a feature byte make a RankLib chain that deep, so the reader and the
//! explanation meet nesting no mutation of a small seed reaches.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankd::rerank::gbdt::import::Library;

/// A RankLib model whose one tree is a chain `depth` splits deep.
fn chain(depth: usize, feature: u8) -> Vec<u8> {
    let mut s =
        String::from("## LambdaMART\n<ensemble>\n<tree id=\"1\" weight=\"0.5\">\n<split>\n");
    for k in 0..depth {
        let f = 1 + (usize::from(feature) + k) % 8;
        s.push_str(&format!(
            "<feature> {f} </feature><threshold> {k} </threshold>\
             <split pos=\"left\"><output> {k} </output></split><split pos=\"right\">\n"
        ));
    }
    s.push_str("<output> 1 </output>\n");
    s.push_str(&"</split>\n".repeat(depth + 1));
    s.push_str("</tree>\n</ensemble>\n");
    s.into_bytes()
}

fuzz_target!(|data: &[u8]| {
    let generated;
    let data = match data.strip_prefix(b"DEEP") {
        Some([hi, lo, feature, ..]) => {
            generated = chain(usize::from(u16::from_be_bytes([*hi, *lo])), *feature);
            &generated[..]
        }
        _ => data,
    };
    let _ = rankd::rerank::Reranker::from_json(data);
    for library in [Library::Xgboost, Library::Lightgbm, Library::Ranklib] {
        let _ = library.parse(data);
    }
    if let Ok(model) = rankd::admin::models::read_upload(data, None) {
        let width = model.num_features();
        let scores = model.score(&vec![0.5; width * 2], 2);
        if let Ok(scores) = scores {
            assert_eq!(scores.len(), 2);
            assert!(scores.iter().all(|s| s.is_finite()), "{scores:?}");
        }
        let _ = model.contributions(&vec![0.5; width]);
    }
});
