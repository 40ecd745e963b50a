//! Judgments from outside rankd's own stores: known-item judgments derived from the Rust docs,
//! and feature logging of judged windows in SVMlight/LETOR format so any external learner can
//! be used too. (The judged windows themselves are `crate::training`'s data set.)

pub mod known_items;
mod svmlight;

pub use svmlight::write_svmlight;
