//! Evaluation metrics and TREC formats (SPEC §4).
