//! The cluster wire as a leaf receives it: the first byte chooses the call
//! (`/cluster/v1/stats`, `table`, `query`, `features`, `feedback`, `hits`), the rest is its
//! JSON body, sent with the cluster key to a leaf's router over the small index of
//! fuzz/src/lib.rs. The first byte's high bit replaces the body's `generation` by the one
//! the leaf pinned (a generation is random per process, so the seeds could not name it), so
//! that inputs reach past the pin. No input may panic, abort or answer 5xx, and every error
//! is the documented JSON. (The leaf's writes are `/admin/documents`'s handlers, fuzzed by
//! `admin_bodies`.)
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

const CALLS: [&str; 6] = ["stats", "table", "query", "features", "feedback", "hits"];

/// The generation the leaf's current searcher has (its index never changes here).
fn pinned() -> u64 {
    static GENERATION: OnceLock<u64> = OnceLock::new();
    *GENERATION.get_or_init(|| {
        let call = serde_json::json!({
            "protocol": rankd::cluster::wire::PROTOCOL,
            "request": {"terms": {}, "cf": false},
        });
        let (status, body) = rankd_fuzz::leaf().send(
            "POST",
            "/cluster/v1/stats",
            "application/json",
            call.to_string().into_bytes(),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let reply: serde_json::Value = serde_json::from_slice(&body).expect("a JSON reply");
        reply["generation"].as_u64().expect("a generation")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let route = CALLS[usize::from(choice & 0x7f) % CALLS.len()];
    let mut body = body.to_vec();
    if choice & 0x80 != 0 {
        if let Ok(serde_json::Value::Object(mut call)) = serde_json::from_slice(&body) {
            if call.contains_key("generation") {
                call.insert("generation".into(), pinned().into());
                body = serde_json::to_vec(&call).expect("a JSON object serialises");
            }
        }
    }
    let uri = format!("/cluster/v1/{route}");
    rankd_fuzz::leaf().send("POST", &uri, "application/json", body);
});
