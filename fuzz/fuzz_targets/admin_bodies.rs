//! Admin request bodies: the first byte chooses the route, the rest is the body, sent with
//! the admin token to rankd's router (fuzz/src/lib.rs): judgments (JSON and qrels text),
//! queries, seeds, evaluation, label batches, deletions; and the training settings of
//! `POST /admin/train`, checked without starting a job. No input may panic or answer 5xx,
//! and every error is the documented JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&route, body)) = data.split_first() else {
        return;
    };
    let (path, content_type) = match route % 8 {
        0 => ("/admin/judgments", "application/json"),
        1 => ("/admin/judgments/qrels", "text/plain"),
        2 => ("/admin/queries", "text/plain"),
        3 => ("/admin/seeds", "application/json"),
        4 => ("/admin/evaluate", "application/json"),
        5 => ("/admin/label-batch", "application/json"),
        6 => ("/admin/documents/delete", "application/json"),
        _ => {
            if let Ok(params) = serde_json::from_slice::<rankd::admin::train::TrainParams>(body) {
                let _ = params.request();
            }
            return;
        }
    };
    rankd_fuzz::server().send("POST", path, content_type, body.to_vec());
});
