//! rankd — a search-engine ranking server.
//!
//! The modules follow the data: documents come in (`corpus`), become an index (`text`) and a
//! link graph (`graph`), get scored, evaluated (`eval`) and leave through the HTTP API (`api`).
//! Formulas live in `../shared/docs/SPEC.md`; each module cites its section.

pub mod api;
pub mod cli;
pub mod corpus;
pub mod eval;
pub mod graph;
pub mod links;
pub mod pairwise;
pub mod text;
