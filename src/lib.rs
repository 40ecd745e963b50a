//! rankd — a search-engine ranking server.
//!
//! The modules follow the data: documents come in (`corpus`), become an index (`text`) and a
//! link graph (`graph`), turn into features, get scored by a model, and leave through the
//! HTTP API (`api`). Formulas live in `../shared/docs/SPEC.md`; each module cites its section.

pub mod corpus;
pub mod text;
