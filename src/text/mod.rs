//! Tantivy schema, analysis and the text scoring models (SPEC §1).

pub mod columns;
pub mod config;
pub mod identifiers;
pub mod index;
pub mod models;
pub mod query;
pub mod schema;
pub mod scorer;
pub mod search;
pub mod simhash;
pub mod snippet;
pub mod stats;
pub mod stats_table;

pub use config::IndexConfig;
pub use index::{TextIndex, WriterBusy};
pub use models::ModelKind;
pub use search::TextError;
