//! Link analysis (SPEC §2).
