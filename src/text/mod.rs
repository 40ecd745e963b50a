//! Tantivy schema, analysis and the text scoring models (SPEC §1).
