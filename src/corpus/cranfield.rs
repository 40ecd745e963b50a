//! The Cranfield 1400 collection (see ../shared/data/README.md for its quirks).
