//! The integration tests, as one binary (after ripgrep's `tests/tests.rs`): one link step for
//! all of them, and every helper written once, in [`util`].
//!
//! Each file of `tests/suite/` is one suite, a module here; its tests are named after it, so a
//! module filter runs one suite: `cargo test --test tests -- ops_admin::` (several filters
//! run several; `.ci/run` runs the PostgreSQL suites that way).
//!
//! The suites share one process, so none may change process-wide state (environment
//! variables, the current directory, signal or panic hooks, a once-per-process choice). A test
//! that must is a binary of its own beside this one, with the reason at its top, and so is a
//! test that must run alone: `pairwise_env.rs` (sets `RANKD_SIMD` before the instruction set
//! is chosen), `cluster_netns.rs` (times answers over a network namespace) and
//! `cluster_rustdocs.rs` (indexes ≈33,000 pages on every core for minutes, which would starve
//! the suites with time bounds here).
//!
//! The one piece of in-process global state a suite reads, the metastore gauge of
//! `rankd::metrics`, changes only in `cluster_metastore`'s own tests, which take a lock.

mod util;

mod suite {
    mod api_http;
    mod cli_ingest;
    mod clicks_letor;
    mod cluster_exact;
    mod cluster_failover;
    mod cluster_generations;
    mod cluster_gossip;
    mod cluster_history;
    mod cluster_loopback;
    mod cluster_metastore;
    mod cluster_models;
    mod cluster_primary;
    mod cluster_trust;
    mod crash;
    mod demo_cli;
    mod dense_http;
    mod events;
    mod experiments;
    mod fuzz_corpus;
    mod gbdt_cli;
    mod gbdt_import;
    mod gbdt_serving;
    mod graph_dataflow;
    mod graph_reference;
    mod hardening_budget;
    mod hardening_cli;
    mod hardening_server;
    mod index_hygiene;
    mod interleave_users;
    mod layers;
    mod names;
    mod ops_admin;
    mod ops_jobs;
    mod ops_labels;
    mod ops_links;
    mod ops_metrics;
    mod ops_models;
    mod pairwise;
    mod ranking_toolbox;
    mod rerank_cli;
    mod rerank_letor;
    mod search_consistency;
    mod second_phase;
    mod text_models_oracle;
    mod train_index;
}
