//! Background jobs as the database records them: kind, parameters, status, progress, message,
//! result or error, timings, and their log lines. `crate::admin::jobs` runs them; this file
//! only reads and writes rows, each state change in one conditional `UPDATE` so two requests
//! racing (a cancel and the job finishing, two cancels) cannot both win.

use serde_json::Value;
use sqlx::Row;

use super::{now_ms, rfc3339, Db};

/// What a job does. `train` is run by the reranker trainer, `graph` recomputes link scores,
/// `eval` evaluates a model on the stored judgments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    Train,
    Graph,
    Eval,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Train => "train",
            JobKind::Graph => "graph",
            JobKind::Eval => "eval",
        }
    }
}

impl std::str::FromStr for JobKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "train" => Ok(JobKind::Train),
            "graph" => Ok(JobKind::Graph),
            "eval" => Ok(JobKind::Eval),
            _ => Err(format!(
                "unknown job kind `{s}` (known: train, graph, eval)"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn is_finished(self) -> bool {
        !matches!(self, JobStatus::Queued | JobStatus::Running)
    }
}

impl std::str::FromStr for JobStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "queued" => Ok(JobStatus::Queued),
            "running" => Ok(JobStatus::Running),
            "succeeded" => Ok(JobStatus::Succeeded),
            "failed" => Ok(JobStatus::Failed),
            "cancelled" => Ok(JobStatus::Cancelled),
            _ => Err(format!(
                "unknown job status `{s}` (known: queued, running, succeeded, failed, cancelled)"
            )),
        }
    }
}

/// One row of `jobs`.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: i64,
    pub kind: JobKind,
    pub params: Value,
    pub status: JobStatus,
    pub progress: f64,
    pub message: String,
    pub cancel_requested: bool,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// A job as the admin API shows it (`GET /admin/jobs`, `GET /admin/jobs/{id}`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct JobView {
    pub id: i64,
    /// train, graph or eval
    pub kind: String,
    /// the parameters the job was started with
    #[schema(value_type = Object)]
    pub params: Value,
    /// queued, running, succeeded, failed or cancelled
    pub status: String,
    /// 0..=1
    pub progress: f64,
    pub message: String,
    pub cancel_requested: bool,
    /// what a succeeded job produced (per kind)
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<String>,
    /// RFC 3339
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// run time of a finished job
    pub seconds: Option<f64>,
}

impl Job {
    pub fn view(&self) -> JobView {
        let seconds = match (self.started_at, self.finished_at) {
            (Some(s), Some(f)) => Some((f - s) as f64 / 1e3),
            _ => None,
        };
        JobView {
            id: self.id,
            kind: self.kind.as_str().to_string(),
            params: self.params.clone(),
            status: self.status.as_str().to_string(),
            progress: self.progress,
            message: self.message.clone(),
            cancel_requested: self.cancel_requested,
            result: self.result.clone(),
            error: self.error.clone(),
            created_at: rfc3339(self.created_at),
            started_at: self.started_at.map(rfc3339),
            finished_at: self.finished_at.map(rfc3339),
            seconds,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a job view serialises")
    }
}

/// A job to record before it runs.
pub struct NewJob {
    pub kind: JobKind,
    pub params: Value,
}

/// What a cancellation request found.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// The job had not started: it is now cancelled.
    Cancelled,
    /// The job is running: it stops at its next cancellation check.
    Requested,
    /// A cancellation was already requested.
    AlreadyRequested,
    /// The job had already finished with this status.
    Finished(JobStatus),
    NotFound,
}

/// Why a job could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("a {0} job is already queued or running")]
    Busy(&'static str),
    /// The job does not apply to this server (the message says why and what to run instead).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

const COLUMNS: &str = "id, kind, params, status, progress, message, cancel_requested, result, \
                       error, created_at, started_at, finished_at";

fn job_from_row(row: &sqlx::any::AnyRow) -> Result<Job, sqlx::Error> {
    let parse_err = |e: String| sqlx::Error::Decode(e.into());
    let json = |s: String| serde_json::from_str(&s).unwrap_or(Value::String(s));
    Ok(Job {
        id: row.try_get("id")?,
        kind: row
            .try_get::<String, _>("kind")?
            .parse()
            .map_err(parse_err)?,
        params: json(row.try_get("params")?),
        status: row
            .try_get::<String, _>("status")?
            .parse()
            .map_err(parse_err)?,
        progress: row.try_get("progress")?,
        message: row.try_get("message")?,
        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
        result: row.try_get::<Option<String>, _>("result")?.map(json),
        error: row.try_get("error")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

impl Db {
    /// Records a queued job; at most one job of each kind may be queued or running.
    pub async fn create_job(&self, job: &NewJob) -> Result<i64, CreateError> {
        let inserted = sqlx::query(
            "INSERT INTO jobs (kind, params, status, created_at) VALUES ($1, $2, 'queued', $3) \
             RETURNING id",
        )
        .bind(job.kind.as_str())
        .bind(job.params.to_string())
        .bind(now_ms())
        .fetch_one(&self.pool)
        .await;
        match inserted {
            Ok(row) => Ok(row.try_get("id")?),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(CreateError::Busy(job.kind.as_str()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Moves a queued job to running; false if it is no longer queued (cancelled meanwhile).
    pub async fn start_job(&self, id: i64) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE jobs SET status = 'running', started_at = $1 WHERE id = $2 AND status = 'queued'",
        )
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn set_job_progress(
        &self,
        id: i64,
        progress: f64,
        message: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE jobs SET progress = $1, message = $2 WHERE id = $3 AND status = 'running'",
        )
        .bind(progress)
        .bind(message)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ends a running job. `result` is stored on success, `error` on failure.
    pub async fn finish_job(
        &self,
        id: i64,
        status: JobStatus,
        message: &str,
        result: Option<&Value>,
        error: Option<&str>,
    ) -> Result<(), sqlx::Error> {
        debug_assert!(status.is_finished());
        sqlx::query(
            "UPDATE jobs SET status = $1, message = $2, result = $3, error = $4, finished_at = $5, \
             progress = CASE WHEN $6 = 1 THEN 1.0 ELSE progress END \
             WHERE id = $7 AND status IN ('queued', 'running')",
        )
        .bind(status.as_str())
        .bind(message)
        .bind(result.map(Value::to_string))
        .bind(error)
        .bind(now_ms())
        .bind(i64::from(status == JobStatus::Succeeded))
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn append_job_log(&self, id: i64, line: &str) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO job_logs (job_id, ts, line) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(now_ms())
            .bind(line)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Asks a job to stop. A queued job is cancelled at once; a running one is flagged and
    /// stops at its next check; anything else is reported as found.
    pub async fn request_cancel(&self, id: i64) -> Result<CancelOutcome, sqlx::Error> {
        let queued = sqlx::query(
            "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, finished_at = $1, \
             message = 'cancelled before it started' WHERE id = $2 AND status = 'queued'",
        )
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        if queued.rows_affected() == 1 {
            return Ok(CancelOutcome::Cancelled);
        }
        let running = sqlx::query(
            "UPDATE jobs SET cancel_requested = 1 \
             WHERE id = $1 AND status = 'running' AND cancel_requested = 0",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        if running.rows_affected() == 1 {
            return Ok(CancelOutcome::Requested);
        }
        Ok(match self.job(id).await? {
            None => CancelOutcome::NotFound,
            Some(job) if job.status.is_finished() => CancelOutcome::Finished(job.status),
            Some(_) => CancelOutcome::AlreadyRequested,
        })
    }

    pub async fn job(&self, id: i64) -> Result<Option<Job>, sqlx::Error> {
        let sql = format!("SELECT {COLUMNS} FROM jobs WHERE id = $1");
        sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(job_from_row)
            .transpose()
    }

    /// Jobs newest first, optionally of one kind or status; and how many match in all.
    pub async fn jobs(
        &self,
        kind: Option<JobKind>,
        status: Option<JobStatus>,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Job>, i64), sqlx::Error> {
        // Each filter is either applied or disabled by a NULL parameter, so one statement
        // with fixed bind parameters serves every combination.
        let filter = "($1 IS NULL OR kind = $2) AND ($3 IS NULL OR status = $4)";
        let kind = kind.map(JobKind::as_str);
        let status = status.map(JobStatus::as_str);
        let total: i64 = sqlx::query(&format!("SELECT COUNT(*) AS n FROM jobs WHERE {filter}"))
            .bind(kind)
            .bind(kind)
            .bind(status)
            .bind(status)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        let sql = format!(
            "SELECT {COLUMNS} FROM jobs WHERE {filter} ORDER BY id DESC LIMIT $5 OFFSET $6"
        );
        let rows = sqlx::query(&sql)
            .bind(kind)
            .bind(kind)
            .bind(status)
            .bind(status)
            .bind(limit)
            .bind(offset)
            .fetch_all(&self.pool)
            .await?;
        let jobs = rows.iter().map(job_from_row).collect::<Result<_, _>>()?;
        Ok((jobs, total))
    }

    /// Log lines of a job in order: `(ts, line)`.
    pub async fn job_logs(&self, id: i64) -> Result<Vec<(i64, String)>, sqlx::Error> {
        let rows = sqlx::query("SELECT ts, line FROM job_logs WHERE job_id = $1 ORDER BY id")
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("ts")?, r.try_get("line")?)))
            .collect()
    }

    /// Marks every queued or running job failed: called at start-up, when no thread of this
    /// process can be running them.
    pub async fn fail_interrupted_jobs(&self) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE jobs SET status = 'failed', error = 'interrupted by restart', \
             finished_at = $1 WHERE status IN ('queued', 'running')",
        )
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
