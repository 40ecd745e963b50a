//! The public API's query strings: the input is sent as the query string of `/search`,
//! `/similar`, `/` and `/doc/…` to rankd's router (fuzz/src/lib.rs) over a small index with
//! link scores. No input may panic or answer 5xx, and every error is the documented JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&route, query)) = data.split_first() else {
        return;
    };
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let uri = match route % 4 {
        0 | 1 => format!("/search?{query}"),
        2 => format!("/similar?{query}"),
        _ => format!("/doc/{query}"),
    };
    rankd_fuzz::server().send("GET", &uri, "text/plain", Vec::new());
});
