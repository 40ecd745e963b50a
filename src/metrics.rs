//! Prometheus metrics of the process, in one registry rendered by `GET /metrics`.
//!
//! Names follow Prometheus practice (one `rankd_` prefix, base units, `_total` counters).
//! HTTP latency uses the OpenTelemetry buckets; search phases get their own histogram with
//! sub-millisecond buckets, because a whole first-phase search takes about a millisecond.
//! Series with labels are created at start-up with zero values so that dashboards and
//! alerts find them before the first event.

use std::sync::LazyLock;

use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The stages of answering a search, timed separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchPhase {
    /// First-phase retrieval through the inverted index (text model, boost).
    Retrieve,
    /// Feature extraction for the rerank window.
    Features,
    /// Second-phase scoring by the learned reranker.
    Rerank,
    /// Collapsing the window's groups (`collapse=`).
    Collapse,
}

impl SearchPhase {
    pub const ALL: [SearchPhase; 4] = [
        SearchPhase::Retrieve,
        SearchPhase::Features,
        SearchPhase::Rerank,
        SearchPhase::Collapse,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SearchPhase::Retrieve => "retrieve",
            SearchPhase::Features => "features",
            SearchPhase::Rerank => "rerank",
            SearchPhase::Collapse => "collapse",
        }
    }
}

/// OpenTelemetry's advice for `http.server.request.duration`, in seconds.
const HTTP_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
/// From 50 µs to 1 s: engine phases are mostly below a millisecond.
const PHASE_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// Background jobs: from a tenth of a second (a small graph) to hours (training).
const JOB_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0,
];

struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    search_phase: HistogramVec,
    index_size: IntGauge,
    index_documents: IntGauge,
    link_scores_stale: IntGauge,
    link_scores_uncovered: IntGauge,
    active_model: IntGaugeVec,
    job_duration: HistogramVec,
    train_epochs: IntCounter,
    train_validation: GaugeVec,
    errors: IntCounterVec,
    cluster_calls: HistogramVec,
    cluster_bytes: IntCounterVec,
    cluster_replica_failures: IntCounterVec,
    cluster_partial: IntCounter,
    generation: IntGaugeVec,
    generation_events: IntCounterVec,
    generation_fetched: IntCounterVec,
    cluster_live_members: IntGauge,
    gossip_unauthenticated: IntGauge,
    metastore_up: IntGauge,
    metastore_errors: IntCounterVec,
    impressions: IntCounterVec,
    impressions_dropped: IntCounter,
    impressions_swapped: IntCounter,
    clicks: IntCounterVec,
    clicked_within: IntCounterVec,
    ctr: GaugeVec,
    abandonment: GaugeVec,
    interleaved: IntCounterVec,
    experiment_impressions: IntGaugeVec,
    experiment_p_value: GaugeVec,
    events_refused: IntCounterVec,
}

static METRICS: LazyLock<Metrics> =
    LazyLock::new(|| Metrics::new().expect("metric definitions are static and valid"));

impl Metrics {
    fn new() -> prometheus::Result<Metrics> {
        let registry = Registry::new();
        let http_requests = IntCounterVec::new(
            Opts::new("rankd_http_requests_total", "HTTP requests answered"),
            &["route", "method", "status"],
        )?;
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "rankd_http_request_duration_seconds",
                "Time from request to response head",
            )
            .buckets(HTTP_BUCKETS.to_vec()),
            &["route", "method"],
        )?;
        let search_phase = HistogramVec::new(
            HistogramOpts::new(
                "rankd_search_phase_duration_seconds",
                "Time spent in each phase of a search",
            )
            .buckets(PHASE_BUCKETS.to_vec()),
            &["phase"],
        )?;
        let index_size = IntGauge::new("rankd_index_size_bytes", "Bytes of the index files")?;
        let index_documents = IntGauge::new("rankd_index_documents", "Documents in the index")?;
        let link_scores_stale = IntGauge::new(
            "rankd_link_scores_stale",
            "1 when documents changed after the served link scores were computed",
        )?;
        let link_scores_uncovered = IntGauge::new(
            "rankd_link_scores_uncovered_documents",
            "Live documents the served link scores do not cover (all of them without scores)",
        )?;
        let active_model = IntGaugeVec::new(
            Opts::new(
                "rankd_active_model_info",
                "The active reranker (value 1; model=\"none\" when no reranker is active)",
            ),
            &["model"],
        )?;
        let job_duration = HistogramVec::new(
            HistogramOpts::new(
                "rankd_job_duration_seconds",
                "Wall time of finished background jobs",
            )
            .buckets(JOB_BUCKETS.to_vec()),
            &["kind", "status"],
        )?;
        let train_epochs = IntCounter::new(
            "rankd_train_epochs_total",
            "Training epochs completed by all training jobs",
        )?;
        let train_validation = GaugeVec::new(
            Opts::new(
                "rankd_train_last_validation",
                "Validation metric after the last completed training epoch",
            ),
            &["metric"],
        )?;
        let errors =
            IntCounterVec::new(Opts::new("rankd_errors_total", "Errors by kind"), &["kind"])?;
        let build_info = IntGaugeVec::new(
            Opts::new("rankd_build_info", "rankd version (value 1)"),
            &["version"],
        )?;
        let cluster_calls = HistogramVec::new(
            HistogramOpts::new(
                "rankd_cluster_leaf_call_duration_seconds",
                "A cluster root's calls to its leaves, per call and shard",
            )
            .buckets(PHASE_BUCKETS.to_vec()),
            &["call", "shard"],
        )?;
        let cluster_bytes = IntCounterVec::new(
            Opts::new(
                "rankd_cluster_bytes_total",
                "Bytes of a cluster root's calls to its leaves (bodies)",
            ),
            &["call", "direction"],
        )?;
        let cluster_replica_failures = IntCounterVec::new(
            Opts::new(
                "rankd_cluster_replica_failures_total",
                "Calls a shard's replica failed (the search moved to another replica)",
            ),
            &["shard"],
        )?;
        let cluster_partial = IntCounter::new(
            "rankd_cluster_partial_responses_total",
            "Searches answered without some shard (partial: true)",
        )?;
        let cluster_live_members = IntGauge::new(
            "rankd_cluster_live_members",
            "Cluster members the gossip failure detector holds alive (this node included)",
        )?;
        let metastore_up = IntGauge::new(
            "rankd_metastore_up",
            "1 when the last read of the cluster metastore succeeded; 0 while serving the last \
             known map",
        )?;
        let metastore_errors = IntCounterVec::new(
            Opts::new(
                "rankd_metastore_errors_total",
                "Failed metastore operations (the node keeps serving its last known map)",
            ),
            &["operation"],
        )?;
        registry.register(Box::new(cluster_live_members.clone()))?;
        let gossip_unauthenticated = IntGauge::new(
            "rankd_cluster_unauthenticated_members",
            "Live gossip members ignored: their cluster-key tag (rankd.auth) is wrong or missing",
        )?;
        registry.register(Box::new(gossip_unauthenticated.clone()))?;
        registry.register(Box::new(metastore_errors.clone()))?;
        registry.register(Box::new(cluster_calls.clone()))?;
        registry.register(Box::new(cluster_bytes.clone()))?;
        registry.register(Box::new(cluster_replica_failures.clone()))?;
        registry.register(Box::new(cluster_partial.clone()))?;
        let generation = IntGaugeVec::new(
            Opts::new(
                "rankd_cluster_generation",
                "The index generation a replica serves, per shard (0: none from a store)",
            ),
            &["shard"],
        )?;
        let generation_events = IntCounterVec::new(
            Opts::new(
                "rankd_cluster_generation_events_total",
                "A replica's generation switches, refusals (missing or corrupt files) and store \
                 errors, per shard",
            ),
            &["shard", "event"],
        )?;
        let generation_fetched = IntCounterVec::new(
            Opts::new(
                "rankd_cluster_generation_fetched_bytes_total",
                "Bytes a replica fetched from the store for new generations, per shard",
            ),
            &["shard"],
        )?;
        let impressions = IntCounterVec::new(
            Opts::new(
                "rankd_impressions_total",
                "Search answers logged as impressions, by model (the reranker, else the first phase)",
            ),
            &["model"],
        )?;
        let impressions_dropped = IntCounter::new(
            "rankd_impressions_dropped_total",
            "Impressions not logged: the queue was full (events.queue_capacity) or a write failed",
        )?;
        let impressions_swapped = IntCounter::new(
            "rankd_impressions_swapped_total",
            "First pages shown with rank 1 swapped with a random lower rank (RandPair, events.swap_share)",
        )?;
        let clicks = IntCounterVec::new(
            Opts::new("rankd_clicks_total", "Stored click events, by model"),
            &["model"],
        )?;
        let clicked_within = IntCounterVec::new(
            Opts::new(
                "rankd_impressions_clicked_total",
                "Impressions with a click at position <= k (k=\"any\": any click), by model",
            ),
            &["model", "k"],
        )?;
        let ctr = GaugeVec::new(
            Opts::new(
                "rankd_ctr_ratio",
                "CTR@k since start: impressions with a click at position <= k over impressions",
            ),
            &["model", "k"],
        )?;
        let abandonment = GaugeVec::new(
            Opts::new(
                "rankd_abandonment_ratio",
                "Impressions without any click over impressions, since start",
            ),
            &["model"],
        )?;
        let interleaved = IntCounterVec::new(
            Opts::new(
                "rankd_interleaved_impressions_total",
                "Searches answered interleaved for an experiment, by experiment id",
            ),
            &["experiment"],
        )?;
        let experiment_impressions = IntGaugeVec::new(
            Opts::new(
                "rankd_experiment_impressions",
                "An experiment's logged impressions at its last count, by outcome: won by the \
                 active ranking (a), by the candidate (b), tied, or without a click",
            ),
            &["experiment", "outcome"],
        )?;
        let experiment_p_value = GaugeVec::new(
            Opts::new(
                "rankd_experiment_p_value",
                "An experiment's p-value at its last count: the sign test's (test=\"sign\") and \
                 the always-valid one promotion acts on (test=\"sequential\")",
            ),
            &["experiment", "test"],
        )?;
        let events_refused = IntCounterVec::new(
            Opts::new(
                "rankd_events_refused_total",
                "Events refused by POST /events, by reason",
            ),
            &["reason"],
        )?;
        for reason in EVENT_REFUSALS {
            events_refused.with_label_values(&[reason]);
        }
        registry.register(Box::new(impressions.clone()))?;
        registry.register(Box::new(impressions_dropped.clone()))?;
        registry.register(Box::new(impressions_swapped.clone()))?;
        registry.register(Box::new(clicks.clone()))?;
        registry.register(Box::new(clicked_within.clone()))?;
        registry.register(Box::new(ctr.clone()))?;
        registry.register(Box::new(abandonment.clone()))?;
        registry.register(Box::new(interleaved.clone()))?;
        registry.register(Box::new(experiment_impressions.clone()))?;
        registry.register(Box::new(experiment_p_value.clone()))?;
        registry.register(Box::new(events_refused.clone()))?;
        registry.register(Box::new(generation.clone()))?;
        registry.register(Box::new(generation_events.clone()))?;
        registry.register(Box::new(generation_fetched.clone()))?;
        registry.register(Box::new(http_requests.clone()))?;
        registry.register(Box::new(http_duration.clone()))?;
        registry.register(Box::new(search_phase.clone()))?;
        registry.register(Box::new(index_size.clone()))?;
        registry.register(Box::new(index_documents.clone()))?;
        registry.register(Box::new(link_scores_stale.clone()))?;
        registry.register(Box::new(link_scores_uncovered.clone()))?;
        registry.register(Box::new(active_model.clone()))?;
        registry.register(Box::new(job_duration.clone()))?;
        registry.register(Box::new(train_epochs.clone()))?;
        registry.register(Box::new(train_validation.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(build_info.clone()))?;
        // CPU seconds, resident memory, open file descriptors of this process.
        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;

        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        for phase in SearchPhase::ALL {
            search_phase.with_label_values(&[phase.as_str()]);
        }
        active_model.with_label_values(&["none"]).set(1);
        for kind in ["train", "graph", "eval"] {
            job_duration.with_label_values(&[kind, "succeeded"]);
        }
        train_validation.with_label_values(&["ndcg@10"]);
        for kind in ERROR_KINDS {
            errors.with_label_values(&[kind]);
        }
        for operation in ["read_map", "register"] {
            metastore_errors.with_label_values(&[operation]);
        }
        Ok(Metrics {
            registry,
            http_requests,
            http_duration,
            search_phase,
            index_size,
            index_documents,
            link_scores_stale,
            link_scores_uncovered,
            active_model,
            job_duration,
            train_epochs,
            train_validation,
            errors,
            cluster_calls,
            cluster_bytes,
            cluster_replica_failures,
            cluster_partial,
            generation,
            generation_events,
            generation_fetched,
            cluster_live_members,
            gossip_unauthenticated,
            metastore_up,
            metastore_errors,
            impressions,
            impressions_dropped,
            impressions_swapped,
            clicks,
            clicked_within,
            ctr,
            abandonment,
            interleaved,
            experiment_impressions,
            experiment_p_value,
            events_refused,
        })
    }
}

/// Error kinds created at start-up: the API error codes and job failures.
const ERROR_KINDS: &[&str] = &[
    "bad_request",
    "not_found",
    "unauthorized",
    "conflict",
    "unavailable",
    "internal",
    "job_failed",
];

/// One answered HTTP request. `route` is the route template (`/doc/{id}`), never the raw
/// path, so that the number of series stays bounded.
pub(crate) fn observe_http(route: &str, method: &str, status: u16, seconds: f64) {
    let m = &*METRICS;
    let status = status.to_string();
    m.http_requests
        .with_label_values(&[route, method, status.as_str()])
        .inc();
    m.http_duration
        .with_label_values(&[route, method])
        .observe(seconds);
}

/// Time spent in one phase of one search.
pub(crate) fn observe_search_phase(phase: SearchPhase, seconds: f64) {
    METRICS
        .search_phase
        .with_label_values(&[phase.as_str()])
        .observe(seconds);
}

/// The index's size on disk and live document count.
pub(crate) fn set_index_stats(size_bytes: u64, documents: u64) {
    METRICS.index_size.set(size_bytes as i64);
    METRICS.index_documents.set(documents as i64);
}

/// Whether the served link scores are stale, and how many live documents they miss.
pub(crate) fn set_link_scores(stale: bool, uncovered_documents: u64) {
    METRICS.link_scores_stale.set(i64::from(stale));
    METRICS
        .link_scores_uncovered
        .set(uncovered_documents as i64);
}

/// The active reranker's model id, or `None` when the first phase alone ranks.
pub(crate) fn set_active_model(id: Option<&str>) {
    let m = &*METRICS;
    m.active_model.reset();
    m.active_model
        .with_label_values(&[id.unwrap_or("none")])
        .set(1);
}

/// A background job finished (`kind` train|graph|eval, `status` succeeded|failed|cancelled).
pub(crate) fn observe_job(kind: &str, status: &str, seconds: f64) {
    METRICS
        .job_duration
        .with_label_values(&[kind, status])
        .observe(seconds);
}

/// A training epoch completed with `value` of the validation `metric` (e.g. `ndcg@10`).
pub(crate) fn observe_training_epoch(metric: &str, value: f64) {
    let m = &*METRICS;
    m.train_epochs.inc();
    m.train_validation.with_label_values(&[metric]).set(value);
}

/// One error of `kind` (an API error code, `job_failed`, ...).
pub(crate) fn count_error(kind: &str) {
    METRICS.errors.with_label_values(&[kind]).inc();
}

/// One call of a cluster root to a leaf: its time and the bytes sent and received.
pub(crate) fn observe_leaf_call(
    call: &str,
    shard: usize,
    seconds: f64,
    sent: usize,
    received: usize,
) {
    let m = &*METRICS;
    m.cluster_calls
        .with_label_values(&[call, &shard.to_string()])
        .observe(seconds);
    m.cluster_bytes
        .with_label_values(&[call, "sent"])
        .inc_by(sent as u64);
    m.cluster_bytes
        .with_label_values(&[call, "received"])
        .inc_by(received as u64);
}

/// A replica of `shard` failed a call.
pub(crate) fn count_replica_failure(shard: usize) {
    METRICS
        .cluster_replica_failures
        .with_label_values(&[&shard.to_string()])
        .inc();
}

/// A search answered without some shard.
pub(crate) fn count_partial_response() {
    METRICS.cluster_partial.inc();
}

/// A replica of `shard` now serves `generation`, having fetched `bytes` for it.
pub(crate) fn set_generation(shard: u32, generation: u64, bytes: u64) {
    let shard = shard.to_string();
    METRICS
        .generation
        .with_label_values(&[&shard])
        .set(generation as i64);
    METRICS
        .generation_fetched
        .with_label_values(&[&shard])
        .inc_by(bytes);
}

/// A replica of `shard` switched generations (`switch`), refused one (`refused`) or could
/// not read the store (`store_error`).
pub(crate) fn count_generation_event(shard: u32, event: &str) {
    METRICS
        .generation_events
        .with_label_values(&[&shard.to_string(), event])
        .inc();
}

/// The number of live gossip members ignored for a wrong or missing tag.
pub(crate) fn set_unauthenticated_members(n: usize) {
    METRICS.gossip_unauthenticated.set(n as i64);
}

/// The number of live cluster members in this node's gossip view.
pub(crate) fn set_live_members(n: usize) {
    METRICS.cluster_live_members.set(n as i64);
}

/// Whether the last metastore read succeeded. The gauge appears with the first read, so a
/// node without a metastore exports none (rather than a 0 an alert would take for an outage).
pub(crate) fn set_metastore_up(up: bool) {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    let m = &*METRICS;
    REGISTERED.call_once(|| {
        if let Err(e) = m.registry.register(Box::new(m.metastore_up.clone())) {
            tracing::error!("cannot register rankd_metastore_up: {e}");
        }
    });
    m.metastore_up.set(i64::from(up));
}

/// A failed metastore `operation` (`read_map`, `register`, ...).
pub(crate) fn count_metastore_error(operation: &str) {
    METRICS
        .metastore_errors
        .with_label_values(&[operation])
        .inc();
}

/// Why `POST /events` refused events (`rankd_events_refused_total{reason}`).
const EVENT_REFUSALS: &[&str] = &["invalid", "unknown_query_id", "rate_limited", "too_large"];

/// The `k` of CTR@k.
const CTR_KS: [i64; 4] = [1, 3, 5, 10];

/// One impression queued for logging.
pub(crate) fn count_impression(model: &str) {
    METRICS.impressions.with_label_values(&[model]).inc();
}

/// Impressions not logged.
pub(crate) fn count_dropped_impressions(n: usize) {
    METRICS.impressions_dropped.inc_by(n as u64);
}

/// One search answered interleaved for experiment `id`.
pub(crate) fn count_interleaved(id: i64) {
    METRICS
        .interleaved
        .with_label_values(&[&id.to_string()])
        .inc();
}

/// Experiment `id`'s counts, as last computed (they come from the stored impressions and
/// clicks, so a gauge: retention can lower them).
pub(crate) fn observe_experiment(id: i64, tally: &crate::interleave::Tally) {
    let m = &*METRICS;
    let id = id.to_string();
    let no_click = tally.impressions.saturating_sub(tally.clicked);
    for (outcome, n) in [
        ("a", tally.wins_a),
        ("b", tally.wins_b),
        ("tie", tally.ties),
        ("no_click", no_click),
    ] {
        m.experiment_impressions
            .with_label_values(&[&id, outcome])
            .set(n as i64);
    }
    m.experiment_p_value
        .with_label_values(&[&id, "sign"])
        .set(tally.p_value());
    m.experiment_p_value
        .with_label_values(&[&id, "sequential"])
        .set(tally.sequential_p_value());
}

/// One first page shown with RandPair's swap.
pub(crate) fn count_swapped_impression() {
    METRICS.impressions_swapped.inc();
}

/// One stored click at `position` of an impression whose best click so far was
/// `previous_best`: the impression now counts as clicked within every k the click reaches
/// and the earlier clicks did not.
pub(crate) fn count_click(model: &str, position: i64, previous_best: Option<i64>) {
    let m = &*METRICS;
    m.clicks.with_label_values(&[model]).inc();
    if previous_best.is_none() {
        m.clicked_within.with_label_values(&[model, "any"]).inc();
    }
    for k in CTR_KS {
        if position <= k && previous_best.is_none_or(|b| b > k) {
            m.clicked_within
                .with_label_values(&[model, &k.to_string()])
                .inc();
        }
    }
}

/// Events refused by `POST /events` for `reason` (one of [`EVENT_REFUSALS`]).
pub(crate) fn count_refused_events(reason: &str, n: usize) {
    METRICS
        .events_refused
        .with_label_values(&[reason])
        .inc_by(n as u64);
}

/// CTR@k and abandonment of every model from its counters, when the metrics are read: at
/// each impression they would cost a search a dozen label lookups.
fn update_ratios() {
    for family in METRICS.impressions.collect() {
        for metric in family.get_metric() {
            for label in metric.get_label() {
                if label.name() == "model" {
                    update_ratios_of(label.value());
                }
            }
        }
    }
}

/// CTR@k and abandonment of `model` from its counters.
fn update_ratios_of(model: &str) {
    let m = &*METRICS;
    let shown = m.impressions.with_label_values(&[model]).get() as f64;
    if shown == 0.0 {
        return;
    }
    for k in CTR_KS {
        let k = k.to_string();
        let clicked = m.clicked_within.with_label_values(&[model, &k]).get() as f64;
        m.ctr.with_label_values(&[model, &k]).set(clicked / shown);
    }
    let clicked = m.clicked_within.with_label_values(&[model, "any"]).get() as f64;
    m.abandonment
        .with_label_values(&[model])
        .set(1.0 - clicked / shown);
}

/// Every metric in the Prometheus text format.
pub fn render() -> String {
    update_ratios();
    let mut out = Vec::new();
    // Encoding into a Vec fails only on invalid metric names, which are static here.
    if let Err(e) = TextEncoder::new().encode(&METRICS.registry.gather(), &mut out) {
        tracing::error!("cannot encode metrics: {e}");
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample line starting with `prefix` in `text`.
    fn sample(text: &str, prefix: &str) -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn observations_show_up_in_the_text_format() {
        observe_search_phase(SearchPhase::Rerank, 0.0003);
        observe_http("/doc/{id}", "GET", 404, 0.002);
        set_active_model(Some("m-7"));
        observe_training_epoch("ndcg@10", 0.42);
        let text = render();
        assert!(text.contains("# TYPE rankd_search_phase_duration_seconds histogram"));
        // 0.3 ms falls in the 0.5 ms bucket but not in the 0.25 ms one.
        assert_eq!(
            sample(
                &text,
                "rankd_search_phase_duration_seconds_bucket{phase=\"rerank\",le=\"0.00025\"}"
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &text,
                "rankd_search_phase_duration_seconds_bucket{phase=\"rerank\",le=\"0.0005\"}"
            ),
            Some(1.0)
        );
        assert!(text.contains(
            "rankd_http_requests_total{method=\"GET\",route=\"/doc/{id}\",status=\"404\"} 1"
        ));
        assert_eq!(
            sample(&text, "rankd_active_model_info{model=\"m-7\"}"),
            Some(1.0)
        );
        assert!(!text.contains("rankd_active_model_info{model=\"none\"}"));
        assert_eq!(
            sample(&text, "rankd_train_last_validation{metric=\"ndcg@10\"}"),
            Some(0.42)
        );
        assert!(text.contains("rankd_search_phase_duration_seconds_count{phase=\"features\"} 0"));
    }
}
