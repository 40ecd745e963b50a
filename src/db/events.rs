//! Impressions and user events (`crate::events`): batched inserts, the all-or-nothing store
//! of a request's events, and retention.

use sqlx::Row;

use super::{now_ms, Backend, Db};
use serde_json::{Map, Value};

/// One answered search, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct Impression {
    pub query_id: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub query: String,
    /// The first-phase model.
    pub model: String,
    /// The reranker, when one ranked the hits.
    pub reranker: Option<String>,
    pub client_id: Option<String>,
    /// The page: `offset` and `k` of the search.
    pub offset: usize,
    pub page_size: usize,
    /// `(object_id, position)` in the order shown; positions are the hits' 1-based ranks.
    pub shown: Vec<(String, i64)>,
    /// For an interleaved answer: its experiment, and each shown document's team.
    pub interleaved: Option<Interleaved>,
}

/// What an interleaved impression adds (`crate::interleave`).
#[derive(Debug, Clone, PartialEq)]
pub struct Interleaved {
    pub experiment_id: i64,
    /// The team of each shown document, in the order of `Impression::shown`.
    pub teams: Vec<crate::interleave::Team>,
}

impl Impression {
    /// The `model` label of the metrics: the reranker if one ranked, else the first phase.
    pub fn model_label(&self) -> &str {
        self.reranker.as_deref().unwrap_or(&self.model)
    }
}

/// One user event (UBI's fields, flattened).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `click`, `dwell`, or any other name.
    pub action_name: String,
    pub query_id: String,
    pub object_id: Option<String>,
    /// The object's 1-based rank in the result list.
    pub position: Option<i64>,
    /// The client's time, milliseconds since the Unix epoch (the server's when absent).
    pub timestamp: i64,
    pub dwell_ms: Option<i64>,
    pub client_id: Option<String>,
    /// Every other field of the event, as sent.
    pub attributes: Option<Map<String, Value>>,
}

impl Event {
    pub fn is_click(&self) -> bool {
        self.action_name == "click"
    }
}

/// What a stored click changed, for the metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredClick {
    /// The impression's metric label ([`Impression::model_label`]).
    pub model: String,
    pub position: i64,
    /// The impression's best (smallest) clicked position before this click.
    pub previous_best: Option<i64>,
}

/// A first page as shown and clicked: what a click model learns from
/// ([`Db::first_page_sessions`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClickedPage {
    pub query: String,
    /// Object ids in the order shown, rank 1 first.
    pub shown: Vec<String>,
    /// Whether each shown object was clicked (one or more click events).
    pub clicked: Vec<bool>,
}

/// Which logged first pages [`Db::first_page_sessions`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Every page: what a click model and its propensities learn from (a page without a
    /// click says its documents were not attractive enough where they were shown).
    All,
    /// The pages with at least one click: what the activation guard's click labels are made
    /// of (a query's clicked documents).
    Clicked,
}

/// What an event needs of its impression.
const IMPRESSION_LOOKUP: &str =
    "SELECT model, reranker, best_click, shown FROM search_impressions WHERE query_id = $1";

/// Why [`Db::store_events`] stored nothing of a request's events.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Query ids no impression was logged under (or whose impression was deleted).
    UnknownQueryIds(Vec<String>),
    /// A click that does not match what its impression showed: `event` is its 0-based index
    /// in the request, `field` `object_id` (not shown) or `position` (shown elsewhere).
    NotShown {
        event: usize,
        field: &'static str,
        message: String,
    },
}

/// Rows per multi-row INSERT: 10 columns × 50 rows stays under SQLite's oldest limit of 999
/// bound parameters.
const ROWS_PER_INSERT: usize = 50;

/// One entry of an impression's `shown` column, as stored (JSON).
#[derive(serde::Serialize)]
struct ShownEntry<'a> {
    object_id: &'a str,
    position: i64,
    /// The interleaving team that contributed the document, for an interleaved answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    team: Option<&'a str>,
}

impl Db {
    /// The newest `newest` logged first pages (`offset` 0), oldest first, with the clicks
    /// their events reported on the objects they showed; `which` chooses every page or only
    /// the pages with a click. Later pages are left out: their ranks do not start at 1, and a
    /// click model's position parameters would mix them with the first page's.
    ///
    /// Bounded twice: at most `newest` pages (the log grows by every search; what learns
    /// from it takes the newest part, `[events] max_training_pages`), and the rows decoded one
    /// at a time as they arrive (a soak's activation that fetched them all at once peaked at
    /// 3 GB). Only those pages' clicks are read.
    pub async fn first_page_sessions(
        &self,
        which: Pages,
        newest: usize,
    ) -> Result<Vec<ClickedPage>, sqlx::Error> {
        use futures_util::TryStreamExt;
        let pages = match which {
            Pages::All => {
                "SELECT query_id, query, shown FROM search_impressions WHERE page_offset = 0 \
                 ORDER BY created_at DESC, query_id DESC LIMIT $1"
            }
            Pages::Clicked => {
                "SELECT query_id, query, shown FROM search_impressions WHERE page_offset = 0 \
                 AND best_click IS NOT NULL ORDER BY created_at DESC, query_id DESC LIMIT $1"
            }
        };
        let newest = i64::try_from(newest).unwrap_or(i64::MAX);
        // query id → the object ids clicked on its page.
        let mut clicked: std::collections::HashMap<String, std::collections::HashSet<String>> =
            Default::default();
        let clicks_sql = format!(
            "SELECT e.query_id, e.object_id FROM search_events e \
             JOIN ({pages}) p ON p.query_id = e.query_id \
             WHERE e.action_name = 'click' AND e.object_id IS NOT NULL"
        );
        let mut clicks = sqlx::query(&clicks_sql).bind(newest).fetch(&self.pool);
        while let Some(r) = clicks.try_next().await? {
            clicked
                .entry(r.try_get(0)?)
                .or_default()
                .insert(r.try_get(1)?);
        }
        drop(clicks);
        let sql = pages;
        let mut rows = sqlx::query(sql).bind(newest).fetch(&self.pool);
        let mut pages = Vec::new();
        while let Some(r) = rows.try_next().await? {
            let query_id: String = r.try_get(0)?;
            let shown: String = r.try_get(2)?;
            let mut shown = shown_positions(&shown)?;
            shown.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            let shown: Vec<String> = shown.into_iter().map(|(id, _)| id).collect();
            let on_page = clicked.get(&query_id);
            let flags = shown
                .iter()
                .map(|id| on_page.is_some_and(|ids| ids.contains(id)))
                .collect();
            pages.push(ClickedPage {
                query: r.try_get(1)?,
                shown,
                clicked: flags,
            });
        }
        // Read newest first (what the bound keeps); given oldest first.
        pages.reverse();
        Ok(pages)
    }

    /// Writes impressions in one transaction.
    pub async fn store_impressions(&self, impressions: &[Impression]) -> Result<(), sqlx::Error> {
        let mut tx = self.begin_write().await?;
        for chunk in impressions.chunks(ROWS_PER_INSERT) {
            let mut sql = String::from(
                "INSERT INTO search_impressions (query_id, created_at, query, model, reranker, \
                 client_id, page_offset, page_size, shown, experiment_id) VALUES ",
            );
            push_bind_marks(&mut sql, self.backend, chunk.len(), 10);
            let mut q = sqlx::query(&sql);
            for i in chunk {
                let teams = i.interleaved.as_ref().map(|x| &x.teams);
                let shown: Vec<ShownEntry> = i
                    .shown
                    .iter()
                    .enumerate()
                    .map(|(k, (id, p))| ShownEntry {
                        object_id: id,
                        position: *p,
                        team: teams.and_then(|t| t.get(k)).map(|t| t.as_str()),
                    })
                    .collect();
                q = q
                    .bind(i.query_id.clone())
                    .bind(i.created_at)
                    .bind(i.query.clone())
                    .bind(i.model.clone())
                    .bind(i.reranker.clone())
                    .bind(i.client_id.clone())
                    .bind(i.offset as i64)
                    .bind(i.page_size as i64)
                    .bind(serde_json::to_string(&shown).map_err(|e| sqlx::Error::Encode(e.into()))?)
                    .bind(i.interleaved.as_ref().map(|x| x.experiment_id));
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await
    }

    /// Stores `events` in one transaction and records each click as its impression's best
    /// click when it is the highest-ranked so far. `Ok(Err(refusal))`: query ids without an
    /// impression, or a click on an object its impression did not show at that position;
    /// nothing was stored.
    pub async fn store_events(
        &self,
        events: &[Event],
    ) -> Result<Result<Vec<StoredClick>, Refusal>, sqlx::Error> {
        let received = now_ms();
        let mut tx = self.begin_write().await?;
        // query id → (metric label, best click)
        let mut known = std::collections::HashMap::new();
        // query id → each shown object's position
        let mut shown: std::collections::HashMap<&str, std::collections::HashMap<String, i64>> =
            std::collections::HashMap::new();
        let mut unknown = Vec::new();
        // On PostgreSQL the impressions are locked until the commit, so that concurrent
        // clicks on one impression see each other's best click (SQLite's write transaction
        // already excludes them); in sorted order, so two requests cannot deadlock.
        let lookup = match self.backend {
            Backend::Sqlite => IMPRESSION_LOOKUP.to_string(),
            Backend::Postgres => format!("{IMPRESSION_LOOKUP} FOR UPDATE"),
        };
        for id in query_ids(events) {
            let row = sqlx::query(&lookup)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            match row {
                Some(r) => {
                    let model: String = r.try_get("model")?;
                    let reranker: Option<String> = r.try_get("reranker")?;
                    let best: Option<i64> = r.try_get("best_click")?;
                    known.insert(id, (reranker.unwrap_or(model), best));
                    let page: String = r.try_get("shown")?;
                    shown.insert(id, shown_positions(&page)?.into_iter().collect());
                }
                None => unknown.push(id.to_string()),
            }
        }
        if !unknown.is_empty() {
            return Ok(Err(Refusal::UnknownQueryIds(unknown)));
        }
        for (event, e) in events.iter().enumerate().filter(|(_, e)| e.is_click()) {
            let (Some(object), Some(position)) = (&e.object_id, e.position) else {
                continue;
            };
            let at = shown.get(e.query_id.as_str()).and_then(|p| p.get(object));
            let refusal = match at {
                None => Some((
                    "object_id",
                    format!(
                        "object_id {object:?} was not shown in the answer of query_id {:?}",
                        e.query_id
                    ),
                )),
                Some(&at) if at != position => Some((
                    "position",
                    format!(
                        "position {position}, but the answer of query_id {:?} showed \
                         {object:?} at position {at} (positions are 1-based ranks)",
                        e.query_id
                    ),
                )),
                Some(_) => None,
            };
            if let Some((field, message)) = refusal {
                return Ok(Err(Refusal::NotShown {
                    event,
                    field,
                    message,
                }));
            }
        }
        for chunk in events.chunks(ROWS_PER_INSERT) {
            let mut sql = String::from(
                "INSERT INTO search_events (query_id, action_name, object_id, position, \
                 event_time, received_at, dwell_ms, client_id, attributes) VALUES ",
            );
            push_bind_marks(&mut sql, self.backend, chunk.len(), 9);
            let mut q = sqlx::query(&sql);
            for e in chunk {
                q = q
                    .bind(e.query_id.clone())
                    .bind(e.action_name.clone())
                    .bind(e.object_id.clone())
                    .bind(e.position)
                    .bind(e.timestamp)
                    .bind(received)
                    .bind(e.dwell_ms)
                    .bind(e.client_id.clone())
                    .bind(
                        e.attributes
                            .as_ref()
                            .map(|a| serde_json::Value::Object(a.clone()).to_string()),
                    );
            }
            q.execute(&mut *tx).await?;
        }
        let mut clicks = Vec::new();
        for e in events.iter().filter(|e| e.is_click()) {
            let Some(position) = e.position else { continue };
            let (model, best) = known
                .get_mut(e.query_id.as_str())
                .expect("every query id was looked up");
            clicks.push(StoredClick {
                model: model.clone(),
                position,
                previous_best: *best,
            });
            if best.is_none_or(|b| position < b) {
                *best = Some(position);
                sqlx::query("UPDATE search_impressions SET best_click = $1 WHERE query_id = $2")
                    .bind(position)
                    .bind(e.query_id.clone())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(Ok(clicks))
    }

    /// Deletes impressions created and events received before `cutoff` (ms); how many of each.
    pub async fn delete_events_before(&self, cutoff: i64) -> Result<(u64, u64), sqlx::Error> {
        let mut tx = self.begin_write().await?;
        let events = sqlx::query("DELETE FROM search_events WHERE received_at < $1")
            .bind(cutoff)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let impressions = sqlx::query("DELETE FROM search_impressions WHERE created_at < $1")
            .bind(cutoff)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok((impressions, events))
    }
}

/// Distinct query ids of `events`, sorted.
/// An impression's stored `shown` column: each shown object's id and position, in stored
/// order.
fn shown_positions(shown: &str) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let entries: Vec<Value> =
        serde_json::from_str(shown).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok(entries
        .iter()
        .filter_map(|v| {
            Some((
                v["object_id"].as_str()?.to_string(),
                v["position"].as_i64()?,
            ))
        })
        .collect())
}

fn query_ids(events: &[Event]) -> std::collections::BTreeSet<&str> {
    events.iter().map(|e| e.query_id.as_str()).collect()
}

/// Appends `($1, .., $k), ($k+1, ..)` for `rows` rows of `columns` values.
fn push_bind_marks(sql: &mut String, backend: Backend, rows: usize, columns: usize) {
    use std::fmt::Write;
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..columns {
            let sep = if c == 0 { "" } else { ", " };
            // SQLite finds a numbered parameter's slot by a linear search of the statement's
            // named parameters, once per bound value: `$n` costs a 500-value insert 125,000
            // comparisons, where plain `?` costs none (it was the impression writer's
            // largest symbol under `perf`). PostgreSQL knows only `$n`.
            let _ = match backend {
                Backend::Sqlite => write!(sql, "{sep}?"),
                Backend::Postgres => write!(sql, "{sep}${}", r * columns + c + 1),
            };
        }
        sql.push(')');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(query_id: &str, created_at: i64, ids: &[&str]) -> Impression {
        Impression {
            query_id: query_id.into(),
            created_at,
            query: format!("q {query_id}"),
            model: "bm25f".into(),
            reranker: None,
            client_id: None,
            offset: 0,
            page_size: ids.len(),
            shown: (1..).zip(ids).map(|(k, id)| (id.to_string(), k)).collect(),
            interleaved: None,
        }
    }

    fn click(query_id: &str, object_id: &str, position: i64) -> Event {
        Event {
            action_name: "click".into(),
            query_id: query_id.into(),
            object_id: Some(object_id.into()),
            position: Some(position),
            timestamp: 0,
            dwell_ms: None,
            client_id: None,
            attributes: None,
        }
    }

    /// The bound keeps the newest pages (oldest first in the answer), of every kind or only
    /// the clicked ones, with exactly their clicks.
    #[tokio::test]
    async fn first_page_sessions_reads_the_newest_pages_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&crate::db::default_url(dir.path())).await.unwrap();
        let pages: Vec<Impression> = (1..=5)
            .map(|t| page(&format!("p{t}"), t, &["a", "b", "c"]))
            .collect();
        db.store_impressions(&pages).await.unwrap();
        let events = [
            click("p1", "a", 1),
            click("p3", "b", 2),
            click("p5", "c", 3),
        ];
        db.store_events(&events).await.unwrap().unwrap();
        let all = db.first_page_sessions(Pages::All, 100).await.unwrap();
        assert_eq!(all.len(), 5);
        let newest = db.first_page_sessions(Pages::All, 2).await.unwrap();
        let seen: Vec<(&str, &[bool])> = newest
            .iter()
            .map(|p| (p.query.as_str(), p.clicked.as_slice()))
            .collect();
        assert_eq!(
            seen,
            [
                ("q p4", &[false; 3][..]),
                ("q p5", &[false, false, true][..])
            ]
        );
        let clicked = db.first_page_sessions(Pages::Clicked, 2).await.unwrap();
        let seen: Vec<(&str, &[bool])> = clicked
            .iter()
            .map(|p| (p.query.as_str(), p.clicked.as_slice()))
            .collect();
        assert_eq!(
            seen,
            [
                ("q p3", &[false, true, false][..]),
                ("q p5", &[false, false, true][..])
            ]
        );
    }
}
