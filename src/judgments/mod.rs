//! Judged (query, document) pairs turned into training and evaluation data: known-item
//! judgments derived from the Rust docs, the first-phase window of every judged query with
//! its feature vectors (SPEC §3.1, §3.5), and feature logging in SVMlight/LETOR format so any
//! external learner can be used too.

pub mod known_items;
mod svmlight;
mod windows;

pub use svmlight::write_svmlight;
pub use windows::{
    judged_windows, project, rank_set, rank_set_columns, rank_set_named, train_on_windows,
    JudgedQuery, Window, WindowStats,
};
