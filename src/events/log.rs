//! The impression queue: searches hand their impressions to a bounded channel without
//! waiting; one background task writes what has queued up in batches, one transaction each.
//! A full queue drops the impression and counts it: logging must never slow a search.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::Impression;
use crate::db::Db;

/// Most impressions written in one transaction (at one write per [`BATCH_WINDOW`], the
/// writer keeps up with 80,000 impressions a second).
const MAX_BATCH: usize = 4096;
/// How long the writer gathers impressions before a commit (bench/events_load.py: with one
/// commit per impression or two under load, logging added a fifth to the search p99).
const BATCH_WINDOW: Duration = Duration::from_millis(50);

pub struct ImpressionLog {
    queue: mpsc::Sender<Impression>,
    /// Impressions accepted into the queue.
    queued: AtomicU64,
    /// Impressions the writer is done with (written, or dropped on a write error).
    done: watch::Receiver<u64>,
}

impl ImpressionLog {
    /// Starts the writer task on the current tokio runtime.
    pub fn start(db: Db, capacity: usize) -> Arc<ImpressionLog> {
        let (queue, rx) = mpsc::channel(capacity.max(1));
        let (done_tx, done) = watch::channel(0);
        tokio::spawn(write_batches(db, rx, done_tx));
        Arc::new(ImpressionLog {
            queue,
            queued: AtomicU64::new(0),
            done,
        })
    }

    /// Queues `impression`; false (and counted as dropped) when the queue is full.
    pub fn record(&self, impression: Impression) -> bool {
        let model = impression.model_label().to_string();
        match self.queue.try_send(impression) {
            Ok(()) => {
                self.queued.fetch_add(1, Ordering::SeqCst);
                crate::metrics::count_impression(&model);
                true
            }
            Err(_) => {
                crate::metrics::count_dropped_impressions(1);
                false
            }
        }
    }

    /// Waits until every impression queued before the call is written, at most `timeout`;
    /// whether it was.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let target = self.queued.load(Ordering::SeqCst);
        let mut done = self.done.clone();
        tokio::time::timeout(timeout, done.wait_for(|&n| n >= target))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

async fn write_batches(db: Db, mut rx: mpsc::Receiver<Impression>, done: watch::Sender<u64>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // Gather for a moment, so that one commit (one fsync) carries many impressions. The
        // writer sleeps through the window and then takes what queued: waiting on the queue
        // instead would wake it for every impression, a task switch on the runtime's threads
        // that the searches beside it pay for (docs/BENCHMARKS.md, "Events").
        if batch.len() < MAX_BATCH {
            tokio::time::sleep(BATCH_WINDOW).await;
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(impression) => batch.push(impression),
                    Err(_) => break,
                }
            }
        }
        if let Err(e) = db.store_impressions(&batch).await {
            tracing::error!("cannot write {} impression(s): {e}", batch.len());
            crate::metrics::count_dropped_impressions(batch.len());
        }
        let n = batch.len() as u64;
        done.send_modify(|d| *d += n);
        batch.clear();
    }
}
