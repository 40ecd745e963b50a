//! Interleaving experiments (`crate::interleave`): their rows, and their counts computed from
//! the interleaved impressions and the click events stored against them.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use sqlx::Row;

use super::{now_ms, Db};
use crate::interleave::{credit, Tally, Team};

/// What `POST /admin/experiments` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExperiment {
    /// The candidate reranker's model id (team B).
    pub candidate: String,
    /// The model active when the experiment starts (team A).
    pub active: Option<String>,
    /// The share of searches interleaved, in (0, 1].
    pub share: f64,
    pub min_impressions: u64,
    pub alpha: f64,
    pub promote_on_win: bool,
}

/// How an experiment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    Running,
    /// Stopped by `POST /admin/experiments/{id}/stop`.
    Stopped,
    /// The candidate won and was activated (`promote_on_win`).
    Promoted,
}

impl ExperimentStatus {
    fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Stopped => "stopped",
            ExperimentStatus::Promoted => "promoted",
        }
    }

    fn parse(s: &str) -> ExperimentStatus {
        match s {
            "running" => ExperimentStatus::Running,
            "promoted" => ExperimentStatus::Promoted,
            _ => ExperimentStatus::Stopped,
        }
    }
}

/// One stored experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub id: i64,
    pub settings: NewExperiment,
    pub status: ExperimentStatus,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub stopped_at: Option<i64>,
    /// What ended it (a promotion's p-value and counts, or who stopped it).
    pub note: Option<String>,
}

const COLUMNS: &str = "id, candidate, active, share, min_impressions, alpha, promote_on_win, \
                       status, created_at, stopped_at, note";

fn experiment(r: &sqlx::any::AnyRow) -> Result<Experiment, sqlx::Error> {
    let status: String = r.try_get("status")?;
    let min: i64 = r.try_get("min_impressions")?;
    let promote: i64 = r.try_get("promote_on_win")?;
    Ok(Experiment {
        id: r.try_get("id")?,
        settings: NewExperiment {
            candidate: r.try_get("candidate")?,
            active: r.try_get("active")?,
            share: r.try_get("share")?,
            min_impressions: min.max(0) as u64,
            alpha: r.try_get("alpha")?,
            promote_on_win: promote != 0,
        },
        status: ExperimentStatus::parse(&status),
        created_at: r.try_get("created_at")?,
        stopped_at: r.try_get("stopped_at")?,
        note: r.try_get("note")?,
    })
}

impl Db {
    /// Stores a new running experiment, or `Ok(Err(id))` when experiment `id` is running
    /// already (nothing stored).
    pub async fn create_experiment(
        &self,
        new: &NewExperiment,
    ) -> Result<Result<Experiment, i64>, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        let running = sqlx::query("SELECT id FROM experiments WHERE status = 'running'")
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(r) = running {
            return Ok(Err(r.try_get(0)?));
        }
        let row = sqlx::query(&format!(
            "INSERT INTO experiments (candidate, active, share, min_impressions, alpha, \
             promote_on_win, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'running', $7) \
             RETURNING {COLUMNS}"
        ))
        .bind(new.candidate.clone())
        .bind(new.active.clone())
        .bind(new.share)
        .bind(new.min_impressions.min(i64::MAX as u64) as i64)
        .bind(new.alpha)
        .bind(i64::from(new.promote_on_win))
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?;
        let created = experiment(&row)?;
        tx.commit().await?;
        Ok(Ok(created))
    }

    /// Every experiment, newest first.
    pub async fn experiments(&self) -> Result<Vec<Experiment>, sqlx::Error> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM experiments ORDER BY id DESC"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(experiment)
        .collect()
    }

    pub async fn experiment(&self, id: i64) -> Result<Option<Experiment>, sqlx::Error> {
        sqlx::query(&format!("SELECT {COLUMNS} FROM experiments WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(experiment)
            .transpose()
    }

    /// The running experiment, if one is.
    pub async fn running_experiment(&self) -> Result<Option<Experiment>, sqlx::Error> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM experiments WHERE status = 'running'"
        ))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(experiment)
        .transpose()
    }

    /// Ends running experiment `id` as `status` with `note`; false when it was not running.
    pub async fn end_experiment(
        &self,
        id: i64,
        status: ExperimentStatus,
        note: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE experiments SET status = $1, stopped_at = $2, note = $3 \
             WHERE id = $4 AND status = 'running'",
        )
        .bind(status.as_str())
        .bind(now_ms())
        .bind(note.to_string())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Experiment `id`'s counts: each of its interleaved impressions credited with the click
    /// events stored against its query id (`crate::interleave::credit`). The impressions are
    /// read row by row: an experiment may have logged millions.
    pub async fn experiment_tally(&self, id: i64) -> Result<Tally, sqlx::Error> {
        use futures_util::TryStreamExt;
        let clicks = sqlx::query(
            "SELECT e.query_id, e.object_id FROM search_events e \
             JOIN search_impressions i ON i.query_id = e.query_id \
             WHERE i.experiment_id = $1 AND e.action_name = 'click' AND e.object_id IS NOT NULL",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        let mut clicked: HashMap<String, HashSet<String>> = HashMap::new();
        for r in &clicks {
            clicked
                .entry(r.try_get(0)?)
                .or_default()
                .insert(r.try_get(1)?);
        }
        let mut tally = Tally::default();
        let (mut teams, mut flags) = (Vec::new(), Vec::new());
        let mut impressions =
            sqlx::query("SELECT query_id, shown FROM search_impressions WHERE experiment_id = $1")
                .bind(id)
                .fetch(&self.pool);
        while let Some(r) = impressions.try_next().await? {
            let query_id: String = r.try_get(0)?;
            let shown: String = r.try_get(1)?;
            let shown: Vec<Value> =
                serde_json::from_str(&shown).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            let on_page = clicked.get(&query_id);
            teams.clear();
            flags.clear();
            for entry in &shown {
                let Some(team) = entry["team"].as_str().and_then(Team::parse) else {
                    continue;
                };
                let object = entry["object_id"].as_str().unwrap_or_default();
                teams.push(team);
                flags.push(on_page.is_some_and(|ids| ids.contains(object)));
            }
            tally.add(credit(&teams, &flags));
        }
        Ok(tally)
    }
}
