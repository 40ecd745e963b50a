//! Model files in every format rankd reads: rankd JSON, XGBoost JSON, LightGBM text and
//! RankLib XML, through each reader and through `POST /admin/models`'s upload check (format
//! detection, validation, binding to the feature set). No panic; a model that is accepted
//! scores a row of the current feature set.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankd::rerank::gbdt::import::Library;

fuzz_target!(|data: &[u8]| {
    let _ = rankd::rerank::Reranker::from_json(data);
    for library in [Library::Xgboost, Library::Lightgbm, Library::Ranklib] {
        let _ = library.parse(data);
    }
    if let Ok(model) = rankd::admin::models::read_upload(data, None) {
        let width = model.num_features();
        let scores = model.score(&vec![0.5; width * 2], 2);
        if let Ok(scores) = scores {
            assert_eq!(scores.len(), 2);
        }
    }
});
