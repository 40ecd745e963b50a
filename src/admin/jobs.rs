//! The background job runner: a job is recorded in the database, runs on a blocking thread,
//! reports progress (0..1), a message and log lines, and observes a cancel flag. Its row ends
//! as succeeded, failed (with the error) or cancelled; a restart marks rows left queued or
//! running as failed (`Db::open`).
//!
//! Any long computation plugs in as a closure:
//!
//! ```ignore
//! let id = runner.start(JobKind::Train, params, move |ctx| {
//!     let model = trainer.train(&data, |fraction| ctx.progress(fraction, "training"),
//!                               ctx.cancel_flag())?;
//!     ctx.check_cancelled()?;
//!     Ok(serde_json::json!({ "model": model.id }))
//! }).await?;
//! ```

use crate::sync::Recover;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::runtime::Handle;

use crate::db::jobs::CreateError;
use crate::db::{CancelOutcome, Db, JobKind, JobStatus, NewJob};

/// Returned by a job's work when it stopped because it was asked to.
#[derive(Debug, thiserror::Error)]
#[error("cancelled on request")]
pub struct Cancelled;

/// Progress is written to the database at most this often (the last value always is).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(200);

/// What a running job can report through, and the flag it must watch.
pub struct JobContext {
    id: i64,
    db: Db,
    runtime: Handle,
    cancel: Arc<AtomicBool>,
    last_progress: Mutex<Option<Instant>>,
}

impl JobContext {
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Set when cancellation is requested; long loops should test it between steps.
    pub fn cancel_flag(&self) -> &AtomicBool {
        &self.cancel
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// `Err(Cancelled)` once cancellation is requested, so work can stop with `?`.
    pub fn check_cancelled(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Reports `fraction` (clamped to 0..1) done and what is happening. Writes are throttled;
    /// a failed write is logged and the job goes on.
    pub fn progress(&self, fraction: f64, message: &str) {
        let mut last = self.last_progress.locked();
        let due = last.is_none_or(|t| t.elapsed() >= PROGRESS_INTERVAL) || fraction >= 1.0;
        if !due {
            return;
        }
        *last = Some(Instant::now());
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if let Err(e) = self
            .runtime
            .block_on(self.db.set_job_progress(self.id, fraction, message))
        {
            tracing::warn!("job {}: cannot record progress: {e}", self.id);
        }
    }

    /// Appends a line to the job's log (free text, or one JSON object such as an epoch's
    /// metrics).
    pub fn log(&self, line: &str) {
        if let Err(e) = self.runtime.block_on(self.db.append_job_log(self.id, line)) {
            tracing::warn!("job {}: cannot append to its log: {e}", self.id);
        }
    }
}

/// Starts jobs and routes cancellation requests to their flags.
pub struct JobRunner {
    db: Db,
    flags: Mutex<HashMap<i64, Arc<AtomicBool>>>,
}

impl JobRunner {
    pub fn new(db: Db) -> Arc<JobRunner> {
        Arc::new(JobRunner {
            db,
            flags: Mutex::new(HashMap::new()),
        })
    }

    /// Records a job of `kind` and runs `work` on a blocking thread; returns the job id at
    /// once. `work`'s value is stored as the job's result. Fails with `CreateError::Busy`
    /// when a job of the same kind is queued or running.
    pub async fn start<F>(
        self: &Arc<Self>,
        kind: JobKind,
        params: Value,
        work: F,
    ) -> Result<i64, CreateError>
    where
        F: FnOnce(&JobContext) -> anyhow::Result<Value> + Send + 'static,
    {
        let id = self.db.create_job(&NewJob { kind, params }).await?;
        let cancel = Arc::new(AtomicBool::new(false));
        self.lock_flags().insert(id, cancel.clone());
        let ctx = JobContext {
            id,
            db: self.db.clone(),
            runtime: Handle::current(),
            cancel,
            last_progress: Mutex::new(None),
        };
        let runner = self.clone();
        tokio::task::spawn_blocking(move || {
            runner.run(kind, ctx, work);
            runner.lock_flags().remove(&id);
        });
        Ok(id)
    }

    fn run<F>(&self, kind: JobKind, ctx: JobContext, work: F)
    where
        F: FnOnce(&JobContext) -> anyhow::Result<Value>,
    {
        let id = ctx.id;
        let started = Instant::now();
        match ctx.runtime.block_on(self.db.start_job(id)) {
            Ok(true) => {}
            Ok(false) => {
                // Cancelled while queued: its row is final already.
                crate::metrics::observe_job(kind.as_str(), "cancelled", 0.0);
                return;
            }
            Err(e) => {
                tracing::error!("job {id}: cannot mark it running: {e}");
                return;
            }
        }
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| work(&ctx)));
        let (status, message, result, error) = match outcome {
            Ok(Ok(value)) => (JobStatus::Succeeded, "done".to_string(), Some(value), None),
            Ok(Err(e)) if e.is::<Cancelled>() || ctx.is_cancelled() => (
                JobStatus::Cancelled,
                "cancelled on request".to_string(),
                None,
                None,
            ),
            Ok(Err(e)) => (
                JobStatus::Failed,
                "failed".to_string(),
                None,
                Some(format!("{e:#}")),
            ),
            Err(panic) => {
                let what = crate::panics::panic_message(panic.as_ref());
                (
                    JobStatus::Failed,
                    "failed".to_string(),
                    None,
                    Some(format!("the job panicked: {what}")),
                )
            }
        };
        if status == JobStatus::Failed {
            crate::metrics::count_error("job_failed");
            tracing::warn!("job {id} ({}) failed: {:?}", kind.as_str(), error);
        }
        crate::metrics::observe_job(
            kind.as_str(),
            status.as_str(),
            started.elapsed().as_secs_f64(),
        );
        if let Err(e) = ctx.runtime.block_on(self.db.finish_job(
            id,
            status,
            &message,
            result.as_ref(),
            error.as_deref(),
        )) {
            tracing::error!("job {id}: cannot record its end: {e}");
        }
    }

    /// Asks job `id` to stop (see [`Db::request_cancel`]) and raises its flag.
    pub async fn cancel(&self, id: i64) -> Result<CancelOutcome, sqlx::Error> {
        let outcome = self.db.request_cancel(id).await?;
        if outcome == CancelOutcome::Requested {
            if let Some(flag) = self.lock_flags().get(&id) {
                flag.store(true, Ordering::SeqCst);
            }
        }
        Ok(outcome)
    }

    fn lock_flags(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<AtomicBool>>> {
        self.flags.locked()
    }
}
