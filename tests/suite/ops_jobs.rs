//! The background job runner in-process, on SQLite or (with `RANKD_TEST_DATABASE_URL`)
//! PostgreSQL: a job's outcome (success, failure, panic, cancellation) is what its row says,
//! progress and logs are recorded, and a restart fails what was left running.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rankd::admin::{Cancelled, JobRunner};
use rankd::db::{CancelOutcome, Db, JobKind, JobStatus};
use serde_json::json;

async fn finished(db: &Db, id: i64) -> rankd::db::Job {
    for _ in 0..400 {
        let job = db.job(id).await.unwrap().unwrap();
        if job.status.is_finished() {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("job {id} did not finish");
}

#[test]
fn outcomes_progress_logs_and_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::util::fresh_database(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = Db::open(&url).await.unwrap();
        let runner = JobRunner::new(db.clone());

        let ok = runner
            .start(JobKind::Eval, json!({"model": "bm25"}), |ctx| {
                ctx.progress(0.5, "half way");
                ctx.log(r#"{"epoch":1,"ndcg@10":0.5}"#);
                ctx.log("second line");
                Ok(json!({"answer": 42}))
            })
            .await
            .unwrap();
        let job = finished(&db, ok).await;
        assert_eq!(job.status, JobStatus::Succeeded);
        assert_eq!(job.progress, 1.0);
        assert_eq!(job.result, Some(json!({"answer": 42})));
        assert_eq!(job.params, json!({"model": "bm25"}));
        assert!(job.started_at.is_some() && job.finished_at >= job.started_at);
        let logs: Vec<String> = db
            .job_logs(ok)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.1)
            .collect();
        assert_eq!(logs, vec![r#"{"epoch":1,"ndcg@10":0.5}"#, "second line"]);
        assert_eq!(
            runner.cancel(ok).await.unwrap(),
            CancelOutcome::Finished(JobStatus::Succeeded)
        );

        let failing = runner
            .start(JobKind::Eval, json!({}), |_| {
                Err(anyhow::anyhow!("no judgments"))
            })
            .await
            .unwrap();
        let job = finished(&db, failing).await;
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.error.as_deref(), Some("no judgments"));

        let panicking = runner
            .start(JobKind::Eval, json!({}), |_| panic!("index out of bounds"))
            .await
            .unwrap();
        let job = finished(&db, panicking).await;
        assert_eq!(job.status, JobStatus::Failed);
        assert!(job.error.unwrap().contains("index out of bounds"));

        // A job that runs until it is told to stop, reporting progress as it goes.
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        // Held until the test has cancelled twice, so the job cannot finish in between.
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let long = runner
            .start(JobKind::Train, json!({"epochs": 1000}), move |ctx| {
                let _ = started_tx.send(());
                let mut step = 0.0;
                while !ctx.cancel_flag().load(Ordering::SeqCst) {
                    step += 1.0;
                    ctx.progress(step / 1e6, "training");
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = release_rx.recv();
                ctx.check_cancelled()?;
                Ok(json!(null))
            })
            .await
            .unwrap();
        started_rx.await.unwrap();
        // One training job at a time.
        let busy = runner
            .start(JobKind::Train, json!({}), |_| Ok(json!(null)))
            .await;
        assert!(busy
            .unwrap_err()
            .to_string()
            .contains("already queued or running"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let running = db.job(long).await.unwrap().unwrap();
        assert_eq!(running.status, JobStatus::Running);
        assert!(
            running.progress > 0.0 && running.message == "training",
            "{running:?}"
        );
        assert_eq!(runner.cancel(long).await.unwrap(), CancelOutcome::Requested);
        assert_eq!(
            runner.cancel(long).await.unwrap(),
            CancelOutcome::AlreadyRequested
        );
        release_tx.send(()).unwrap();
        let job = finished(&db, long).await;
        assert_eq!(job.status, JobStatus::Cancelled);
        assert!(job.cancel_requested);
        assert_eq!(
            runner.cancel(long).await.unwrap(),
            CancelOutcome::Finished(JobStatus::Cancelled)
        );
        assert_eq!(
            runner.cancel(123_456).await.unwrap(),
            CancelOutcome::NotFound
        );

        // Work that returns `Cancelled` on its own is recorded as cancelled too.
        let own = runner
            .start(JobKind::Graph, json!({}), |_| Err(Cancelled.into()))
            .await
            .unwrap();
        assert_eq!(finished(&db, own).await.status, JobStatus::Cancelled);

        // Listing, newest first, by kind and status.
        let (all, total) = db.jobs(None, None, 100, 0).await.unwrap();
        assert_eq!(total, 5);
        assert_eq!(all[0].id, own);
        let (failed, n) = db
            .jobs(Some(JobKind::Eval), Some(JobStatus::Failed), 1, 0)
            .await
            .unwrap();
        assert_eq!((failed.len(), n), (1, 2));
        assert_eq!(failed[0].id, panicking);
    });
}

#[test]
fn reopening_fails_jobs_left_running() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::util::fresh_database(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = Db::open(&url).await.unwrap();
        let runner = JobRunner::new(db.clone());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let id = runner
            .start(JobKind::Graph, json!({}), move |_| {
                // Blocks until the test ends: the "process" dies with the job running.
                let _ = rx.recv();
                Ok(json!(null))
            })
            .await
            .unwrap();
        for _ in 0..100 {
            if db.job(id).await.unwrap().unwrap().status == JobStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let reopened = Db::open(&url).await.unwrap();
        let job = reopened.job(id).await.unwrap().unwrap();
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.error.as_deref(), Some("interrupted by restart"));
        // The old worker finishing later cannot resurrect the row.
        drop(tx);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            reopened.job(id).await.unwrap().unwrap().status,
            JobStatus::Failed
        );
    });
}
