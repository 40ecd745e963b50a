//! LETOR / SVMlight files (`rankd train --letor`, `rankd eval-letor`): any file is read or
//! refused with an error, and one that reads becomes a training set (the dense feature
//! matrix) without a panic or an allocation sized by a hostile feature index (issue 16,
//! item 4). The first byte chooses between `qid:` groups and a group-size file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (rows, groups) = if mode % 2 == 0 {
        (rest, None)
    } else {
        // The group sizes come first, up to a NUL byte.
        match rest.iter().position(|&b| b == 0) {
            Some(i) => (&rest[i + 1..], Some(&rest[..i])),
            None => (rest, Some(&b"1\n"[..])),
        }
    };
    let path = rankd_fuzz::scratch_file("letor.txt", rows);
    let groups = groups.map(|g| rankd_fuzz::scratch_file("letor.txt.query", g));
    if let Ok(set) = rankd::corpus::letor::read(&path, groups.as_deref()) {
        let _ = rankd::rerank::RankSet::from_letor(&set);
    }
});
