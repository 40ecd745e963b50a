//! What users did with the answers: impressions (every `/search` answer, under its query id)
//! and the events clients report about them (clicks, dwell times, free-named actions), in the
//! shape of OpenSearch's User Behavior Insights (UBI) where it fits (docs/GUIDE.md says where
//! it does not). They are the raw material of click models and unbiased training (issue 32).
//!
//! - [`Impression`] (made by `crate::search::SearchResponse::log`) and
//!   [`ImpressionLog`] (`log.rs`): a search hands its impression to a bounded queue and
//!   returns; a background task writes the queue in batches. A full queue drops the
//!   impression and counts it (`rankd_impressions_dropped_total`): logging never slows or
//!   blocks a search.
//! - [`Event`] and [`parse_events`]: a request body (NDJSON or a JSON array) becomes events or
//!   an [`EventError`] naming the line and the field; nothing of a bad body is stored.
//! - [`EventStore::store`]: refuses events of unknown query ids, else commits all of a
//!   request's events in one transaction before answering (acknowledged = durable).
//! - [`ClientBudget`] (`budget.rs`): events per second per client address.
//! - The rows ([`Impression`], [`Event`]) and their SQL live in `crate::db::events`, below
//!   this module.
//! - Retention: [`EventStore::run_retention`] deletes what is older than
//!   `events.retention_days`, at start-up and hourly.

mod budget;
mod log;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

pub use crate::db::events::{Event, Impression, Interleaved, StoredClick};
pub use budget::ClientBudget;
pub use log::ImpressionLog;

use crate::db::Db;

/// Settings of the event log (`[events]` in the configuration file).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventSettings {
    /// Whether `/search` logs its impressions (and answers with a `query_id`). Off, the server
    /// keeps no record of what it showed, and `POST /events` finds no query id to accept.
    pub log_impressions: bool,
    /// Impressions and events older than this many days are deleted (at start-up, then hourly).
    pub retention_days: u32,
    /// Impressions waiting to be written; one more is dropped and counted.
    pub queue_capacity: usize,
    /// Events accepted per second from one client address (its burst: one second's worth);
    /// a request over it is refused whole with 429.
    pub max_per_second: u32,
    /// Largest `POST /events` body.
    pub max_body_bytes: usize,
    /// Most events in one `POST /events` request.
    pub max_per_request: usize,
    /// Share of logged first pages shown with RandPair's swap ([`rand_pair`]): what lets the
    /// click model tell examination from attraction in the server's own log, so that
    /// training on clicks can weight them (`POST /admin/train {"source":"clicks"}`). 0 turns
    /// it off.
    pub swap_share: f64,
    /// Most logged first pages that training on clicks, the activation guard's click labels
    /// and `click-model --from-db` read: the newest ones (the log grows with every search).
    pub max_training_pages: usize,
}

impl Default for EventSettings {
    fn default() -> Self {
        EventSettings {
            log_impressions: true,
            retention_days: 90,
            queue_capacity: 65_536,
            max_per_second: 20_000,
            max_body_bytes: 1 << 20,
            max_per_request: 1000,
            swap_share: DEFAULT_SWAP_SHARE,
            max_training_pages: DEFAULT_MAX_TRAINING_PAGES,
        }
    }
}

/// [`EventSettings::swap_share`] unless told otherwise: off. A swap costs the user whose page
/// it is (docs/EVALUATION.md, "Randomised first pages", has both sides measured), and only a
/// server that trains on its clicks gains from it, so the operator who does turns it on; the
/// click training's warning says so when the log cannot identify the propensities.
pub const DEFAULT_SWAP_SHARE: f64 = 0.0;

/// [`EventSettings::max_training_pages`] unless told otherwise: at roughly 600 bytes per
/// decoded page of ten ids, on the order of 100 MB, which a training job can hold beside the
/// served index.
pub const DEFAULT_MAX_TRAINING_PAGES: usize = 200_000;

/// RandPair (Joachims, Swaminathan & Schnabel, "Unbiased learning-to-rank with biased
/// feedback", WSDM 2017, §5.1): whether the first page answered under `query_id`, of `shown`
/// hits, is randomised — drawn with probability `share` — and if so the 0-based rank whose
/// hit changes places with rank 1's, uniform over the lower ranks. A document clicked at
/// rank 1 on some pages and at rank k on others is what separates rank k's examination from
/// the document's attraction (the position-based model's EM, SPEC §11); a swap with rank 1
/// costs a user less than shuffling the page, and identifies every rank's propensity
/// relative to rank 1. A function of the query id (independent of the interleaving draw,
/// `crate::interleave::sampled`), so the page can be recomputed from its impression.
pub fn rand_pair(query_id: &str, share: f64, shown: usize) -> Option<usize> {
    if shown < 2 {
        return None;
    }
    let draw = crate::interleave::splitmix64(crate::interleave::seed_of(query_id) ^ RAND_PAIR_SALT);
    // 53 bits: the uniform doubles in [0, 1).
    let u = (draw >> 11) as f64 / (1u64 << 53) as f64;
    (u < share).then(|| {
        let rank = crate::interleave::splitmix64(draw);
        1 + (rank % (shown as u64 - 1)) as usize
    })
}

/// Keeps [`rand_pair`]'s draw apart from the interleaving's.
const RAND_PAIR_SALT: u64 = 0x5241_4e44_5041_4952;

/// Longest query id, action name, object id or client id accepted.
pub const MAX_ID_LEN: usize = 256;
/// Largest `attributes` object, serialised.
pub const MAX_ATTRIBUTES_BYTES: usize = 4096;
/// Highest position accepted (the search's `offset` + `k` stays far below).
pub const MAX_POSITION: i64 = 100_000;

/// A new query id: 26 characters of Crockford base32 (ULID's layout): 48 bits of
/// milliseconds since the Unix epoch, then 80 random bits. Ids sort by creation time.
pub fn new_query_id() -> String {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let ms = crate::db::now_ms().max(0) as u128 & ((1 << 48) - 1);
    let random: u128 = rand::random::<u128>() & ((1 << 80) - 1);
    let value = (ms << 80) | random;
    (0..26)
        .map(|i| ALPHABET[((value >> (125 - 5 * i)) & 31) as usize] as char)
        .collect()
}

/// Why a body's events were refused: which event (1-based line of NDJSON, or element of an
/// array) and which field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("event {line}: {message}")]
pub struct EventError {
    pub line: usize,
    pub field: String,
    pub message: String,
}

/// Parses a `POST /events` body: a JSON array of events, or one event per line (NDJSON;
/// blank lines skipped). All or nothing: the first bad event is the error.
pub fn parse_events(body: &[u8], max_events: usize) -> Result<Vec<Event>, EventError> {
    let text = std::str::from_utf8(body).map_err(|e| EventError {
        line: 1,
        field: "body".into(),
        message: format!("the body is not UTF-8: {e}"),
    })?;
    let received = crate::db::now_ms();
    let objects: Vec<(usize, Result<Value, String>)> = if text.trim_start().starts_with('[') {
        match serde_json::from_str::<Vec<Value>>(text) {
            Ok(values) => values
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i + 1, Ok(v)))
                .collect(),
            Err(e) => vec![(e.line(), Err(format!("not a JSON array: {e}")))],
        }
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, serde_json::from_str(l).map_err(|e| e.to_string())))
            .collect()
    };
    if objects.is_empty() {
        return Err(EventError {
            line: 1,
            field: "body".into(),
            message: "no events: send a JSON array or one JSON object per line".into(),
        });
    }
    if objects.len() > max_events {
        return Err(EventError {
            line: max_events + 1,
            field: "body".into(),
            message: format!(
                "{} events; at most {max_events} are accepted per request (events.max_per_request)",
                objects.len()
            ),
        });
    }
    objects
        .into_iter()
        .map(|(line, value)| {
            let fail = |field: &str, message: String| EventError {
                line,
                field: field.into(),
                message,
            };
            match value {
                Ok(Value::Object(map)) => event(map, received).map_err(|(f, m)| fail(&f, m)),
                Ok(_) => Err(fail("body", "an event must be a JSON object".into())),
                Err(e) => Err(fail("body", format!("invalid JSON: {e}"))),
            }
        })
        .collect()
}

/// One event from its JSON object; `Err((field, message))`.
fn event(mut map: Map<String, Value>, received: i64) -> Result<Event, (String, String)> {
    let action_name = id(&mut map, "action_name")?.ok_or_else(|| missing("action_name"))?;
    let query_id = id(&mut map, "query_id")?.ok_or_else(|| missing("query_id"))?;
    let mut object_id = id(&mut map, "object_id")?;
    let mut position = integer(&mut map, "position", 1, MAX_POSITION)?;
    // UBI's nesting: event_attributes.object.object_id and event_attributes.position.ordinal.
    if let Some(Value::Object(nested)) = map.get("event_attributes") {
        let at = |path: &[&str]| path.iter().try_fold(nested, |v, k| v.get(*k)?.as_object());
        if object_id.is_none() {
            object_id = at(&["object"])
                .and_then(|o| o.get("object_id"))
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if position.is_none() {
            if let Some(ordinal) = at(&["position"]).and_then(|p| p.get("ordinal")) {
                let mut m = Map::from_iter([("position".to_string(), ordinal.clone())]);
                position = integer(&mut m, "position", 1, MAX_POSITION)?;
            }
        }
    }
    let timestamp = match map.remove("timestamp") {
        None | Some(Value::Null) => received,
        Some(Value::Number(n)) => n
            .as_i64()
            .filter(|&t| t >= 0)
            .ok_or_else(|| bad("timestamp", "must be milliseconds since the Unix epoch"))?,
        Some(Value::String(s)) => {
            use tantivy::time::format_description::well_known::Rfc3339;
            tantivy::time::OffsetDateTime::parse(&s, &Rfc3339)
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
                .map_err(|e| bad("timestamp", &format!("{s:?} is not RFC 3339 ({e})")))?
        }
        Some(_) => {
            return Err(bad(
                "timestamp",
                "must be RFC 3339 text or milliseconds since the Unix epoch",
            ))
        }
    };
    let dwell_ms = integer(&mut map, "dwell_ms", 0, i64::from(u32::MAX))?;
    let client_id = id(&mut map, "client_id")?;
    let mut attributes = match map.remove("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a,
        Some(_) => return Err(bad("attributes", "must be a JSON object")),
    };
    // Other UBI fields (application, session_id, message, event_attributes...) are kept.
    attributes.extend(map);
    if action_name == "click" {
        if object_id.is_none() {
            return Err(bad("object_id", "a click names the object clicked"));
        }
        if position.is_none() {
            return Err(bad("position", "a click gives the object's position"));
        }
    }
    if action_name == "dwell" && dwell_ms.is_none() {
        return Err(bad("dwell_ms", "a dwell event gives its duration"));
    }
    let attributes = (!attributes.is_empty()).then_some(attributes);
    if let Some(a) = &attributes {
        let size = Value::Object(a.clone()).to_string().len();
        if size > MAX_ATTRIBUTES_BYTES {
            return Err(bad(
                "attributes",
                &format!("{size} bytes of attributes; at most {MAX_ATTRIBUTES_BYTES}"),
            ));
        }
    }
    Ok(Event {
        action_name,
        query_id,
        object_id,
        position,
        timestamp,
        dwell_ms,
        client_id,
        attributes,
    })
}

fn missing(field: &str) -> (String, String) {
    bad(field, "is required")
}

fn bad(field: &str, message: &str) -> (String, String) {
    (field.to_string(), format!("{field} {message}"))
}

/// A non-empty string field of at most [`MAX_ID_LEN`] bytes, removed from `map`.
fn id(map: &mut Map<String, Value>, field: &str) -> Result<Option<String>, (String, String)> {
    match map.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID_LEN => Ok(Some(s)),
        Some(_) => Err(bad(
            field,
            &format!("must be a non-empty string of at most {MAX_ID_LEN} bytes"),
        )),
    }
}

/// An integer field within `lo..=hi`, removed from `map`.
fn integer(
    map: &mut Map<String, Value>,
    field: &str,
    lo: i64,
    hi: i64,
) -> Result<Option<i64>, (String, String)> {
    match map.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .filter(|n| (lo..=hi).contains(n))
            .map(Some)
            .ok_or_else(|| bad(field, &format!("must be an integer in [{lo}, {hi}]"))),
    }
}

/// Why [`EventStore::store`] stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Query ids no impression was logged under (or whose impression was deleted).
    #[error("unknown query_id {}", .0.join(", "))]
    UnknownQueryIds(Vec<String>),
    /// A click on an object its impression did not show, or not at that position.
    #[error("event {line}: {message}")]
    NotShown {
        /// 1-based, as [`EventError`]'s.
        line: usize,
        field: &'static str,
        message: String,
    },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The impression log and the event table, with their settings.
pub struct EventStore {
    pub db: Db,
    pub log: Arc<ImpressionLog>,
    pub settings: EventSettings,
    pub budget: ClientBudget,
}

/// How long [`EventStore::store`] waits for queued impressions before calling a query id
/// unknown.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

impl EventStore {
    /// Starts the impression writer (on the current tokio runtime).
    pub fn start(db: Db, settings: EventSettings) -> EventStore {
        EventStore {
            log: ImpressionLog::start(db.clone(), settings.queue_capacity),
            budget: ClientBudget::new(settings.max_per_second),
            db,
            settings,
        }
    }

    /// Queues `impression` for writing (`crate::search::SearchResponse::log` makes it).
    /// Never waits.
    pub fn log_impression(&self, impression: Impression) {
        self.log.record(impression);
    }

    /// Waits (up to [`FLUSH_WAIT`]) until every impression queued so far is written, so that
    /// a reader of the log sees every search answered before the call: training on clicks
    /// right after the searches must not miss the last batch.
    pub async fn settle(&self) {
        if !self.log.flush(FLUSH_WAIT).await {
            tracing::warn!(
                "impressions still queued after {FLUSH_WAIT:?}; reading the log without them"
            );
        }
    }

    /// Stores `events` in one transaction, or nothing when one names an unknown query id.
    /// A query id whose impression is still queued is waited for (up to [`FLUSH_WAIT`]).
    pub async fn store(&self, events: &[Event]) -> Result<(), StoreError> {
        use crate::db::events::Refusal;
        let outcome = match self.db.store_events(events).await? {
            Err(Refusal::UnknownQueryIds(_)) if self.log.flush(FLUSH_WAIT).await => {
                self.db.store_events(events).await?
            }
            other => other,
        };
        match outcome {
            Ok(clicks) => {
                for c in clicks {
                    crate::metrics::count_click(&c.model, c.position, c.previous_best);
                }
                Ok(())
            }
            Err(Refusal::UnknownQueryIds(unknown)) => {
                crate::metrics::count_refused_events("unknown_query_id", events.len());
                Err(StoreError::UnknownQueryIds(unknown))
            }
            Err(Refusal::NotShown {
                event,
                field,
                message,
            }) => {
                crate::metrics::count_refused_events("invalid", 1);
                Err(StoreError::NotShown {
                    line: event + 1,
                    field,
                    message,
                })
            }
        }
    }

    /// Deletes impressions and events older than `events.retention_days`, now and every hour.
    pub async fn run_retention(db: Db, retention_days: u32) {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            let cutoff = crate::db::now_ms() - i64::from(retention_days) * 86_400_000;
            match db.delete_events_before(cutoff).await {
                Ok((impressions, events)) if impressions + events > 0 => tracing::info!(
                    "retention: deleted {impressions} impression(s) and {events} event(s) \
                     older than {retention_days} days"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("retention: cannot delete old events: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand_pair_swaps_its_share_with_a_uniform_lower_rank() {
        let ids: Vec<String> = (0..20_000).map(|i| format!("q{i}")).collect();
        assert!(ids.iter().all(|id| rand_pair(id, 0.0, 10).is_none()));
        // Nothing to swap on a page of one hit, whatever the share.
        assert!(ids.iter().all(|id| rand_pair(id, 1.0, 1).is_none()));
        assert!(ids.iter().all(|id| rand_pair(id, 1.0, 0).is_none()));
        // Share 1: every page, each lower rank about equally often (1 of 9 each: 2,222).
        let mut at = [0usize; 10];
        for id in &ids {
            let k = rand_pair(id, 1.0, 10).expect("share 1 swaps every page");
            assert!((1..10).contains(&k), "{k}");
            at[k] += 1;
        }
        assert!(
            at[1..].iter().all(|&n| (2_000..2_450).contains(&n)),
            "{at:?}"
        );
        // Share 0.1: about 2,000 of 20,000 (σ ≈ 42).
        let swapped = ids
            .iter()
            .filter(|id| rand_pair(id, 0.1, 10).is_some())
            .count();
        assert!((1_850..2_150).contains(&swapped), "{swapped}");
        // A function of the id, and independent of the interleaving draw: at shares of one
        // half each, a quarter of the pages are drawn by both (5,000, σ ≈ 61).
        assert!(ids
            .iter()
            .all(|id| rand_pair(id, 0.3, 7) == rand_pair(id, 0.3, 7)));
        let both = ids
            .iter()
            .filter(|id| rand_pair(id, 0.5, 10).is_some() && crate::interleave::sampled(id, 0.5))
            .count();
        assert!((4_750..5_250).contains(&both), "{both}");
    }

    #[test]
    fn query_ids_are_ulid_shaped_and_distinct() {
        let a = new_query_id();
        let b = new_query_id();
        assert_eq!(a.len(), 26);
        assert_ne!(a, b);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
        // The first ten characters are the milliseconds: a later id never sorts first.
        std::thread::sleep(Duration::from_millis(2));
        assert!(new_query_id()[..10] > a[..10]);
    }

    #[test]
    fn ndjson_and_arrays_parse_to_the_same_events() {
        let line = r#"{"action_name":"click","query_id":"Q","object_id":"d1","position":2,"timestamp":"2026-11-28T06:00:00Z","session_id":"s"}"#;
        let ndjson = parse_events(format!("{line}\n\n{line}\n").as_bytes(), 10).unwrap();
        let array = parse_events(format!("[{line},{line}]").as_bytes(), 10).unwrap();
        assert_eq!(ndjson, array);
        assert_eq!(ndjson.len(), 2);
        let e = &ndjson[0];
        assert_eq!(e.position, Some(2));
        assert_eq!(e.timestamp, 1_795_845_600_000);
        assert_eq!(e.attributes.as_ref().unwrap()["session_id"], "s");
    }

    #[test]
    fn ubi_nesting_gives_object_and_position() {
        let body = r#"{"action_name":"click","query_id":"Q","event_attributes":{"object":{"object_id":"d9"},"position":{"ordinal":4}}}"#;
        let e = &parse_events(body.as_bytes(), 10).unwrap()[0];
        assert_eq!(e.object_id.as_deref(), Some("d9"));
        assert_eq!(e.position, Some(4));
    }

    #[test]
    fn bad_events_name_their_line_and_field() {
        let ok = r#"{"action_name":"view","query_id":"Q"}"#;
        for (bad, field) in [
            (r#"{"query_id":"Q"}"#, "action_name"),
            (
                r#"{"action_name":"click","query_id":"Q","position":1}"#,
                "object_id",
            ),
            (
                r#"{"action_name":"click","query_id":"Q","object_id":"d"}"#,
                "position",
            ),
            (
                r#"{"action_name":"click","query_id":"Q","object_id":"d","position":0}"#,
                "position",
            ),
            (r#"{"action_name":"dwell","query_id":"Q"}"#, "dwell_ms"),
            (r#"{"action_name":"x","query_id":7}"#, "query_id"),
            (
                r#"{"action_name":"x","query_id":"Q","timestamp":"yesterday"}"#,
                "timestamp",
            ),
            (
                r#"{"action_name":"x","query_id":"Q","attributes":[1]}"#,
                "attributes",
            ),
            (r#"{"action_name":"x","#, "body"),
            ("[1]", "body"),
        ] {
            let body = format!("{ok}\n{bad}\n");
            let e = parse_events(body.as_bytes(), 10).unwrap_err();
            assert_eq!(e.field, field, "{bad}: {e}");
            assert_eq!(e.line, 2, "{bad}: {e}");
        }
        assert_eq!(parse_events(b"", 10).unwrap_err().field, "body");
        let many = format!("{ok}\n").repeat(11);
        assert_eq!(parse_events(many.as_bytes(), 10).unwrap_err().field, "body");
    }
}
