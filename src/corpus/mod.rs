//! Documents and their sources.
