//! Label batches and reservations (SPEC §5): a batch of (query, document) pairs handed to an
//! assessor, each pair reserved until it is judged (`store_judgments` deletes its reservation),
//! its batch is released, or it expires. A pair has at most one reservation (primary key), so
//! two batches never hand out the same pair, even from two servers on one PostgreSQL.

use std::collections::HashSet;

use serde_json::Value;
use sqlx::Row;

use super::{now_ms, rfc3339, Db};

/// A batch to record, with its pairs in pick order.
#[derive(Debug, Clone)]
pub struct NewBatch {
    pub batch_id: String,
    pub assessor: String,
    pub params: Value,
    pub model: Option<String>,
    pub pool_size: usize,
    pub expires_at: i64,
    /// `(query_id, doc_id)` in pick order.
    pub pairs: Vec<(String, String)>,
}

/// What recording a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    Done,
    /// Another batch reserved one of the pairs meanwhile; nothing was recorded.
    Conflict,
}

/// One live reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub query_id: String,
    pub doc_id: String,
    pub batch_id: String,
    pub position: i64,
    pub reserved_by: String,
    pub reserved_at: i64,
    pub expires_at: i64,
}

/// A reservation as `GET /admin/reservations` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ReservationView {
    pub query_id: String,
    pub doc_id: String,
    pub batch_id: String,
    /// position in its batch
    pub pos: i64,
    pub assessor: String,
    /// RFC 3339
    pub reserved_at: String,
    /// RFC 3339
    pub expires_at: String,
}

impl Reservation {
    pub fn view(&self) -> ReservationView {
        ReservationView {
            query_id: self.query_id.clone(),
            doc_id: self.doc_id.clone(),
            batch_id: self.batch_id.clone(),
            pos: self.position,
            assessor: self.reserved_by.clone(),
            reserved_at: rfc3339(self.reserved_at),
            expires_at: rfc3339(self.expires_at),
        }
    }
}

/// Which reservations to list.
#[derive(Debug, Clone, Default)]
pub struct ReservationFilter {
    pub assessor: Option<String>,
    pub batch_id: Option<String>,
    pub limit: i64,
    pub offset: i64,
}

impl Db {
    /// Every stored query text, by query id.
    pub async fn query_texts(&self) -> Result<Vec<(String, String)>, sqlx::Error> {
        sqlx::query("SELECT query_id, text FROM queries ORDER BY query_id")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| Ok((r.try_get("query_id")?, r.try_get("text")?)))
            .collect()
    }

    /// Pairs that are judged or reserved (unexpired) now: not to be offered again.
    pub async fn unavailable_pairs(&self) -> Result<HashSet<(String, String)>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT query_id, doc_id FROM judgments UNION \
             SELECT query_id, doc_id FROM label_reservations WHERE expires_at > $1",
        )
        .bind(now_ms())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("query_id")?, r.try_get("doc_id")?)))
            .collect()
    }

    /// Records a batch and reserves its pairs in one transaction, after deleting expired
    /// reservations. A pair reserved meanwhile by another batch fails the whole batch.
    pub async fn reserve_batch(&self, batch: &NewBatch) -> Result<Reserved, sqlx::Error> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM label_reservations WHERE expires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO label_batches (batch_id, assessor, params, model, pool_size, items, \
             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&batch.batch_id)
        .bind(&batch.assessor)
        .bind(batch.params.to_string())
        .bind(batch.model.as_deref())
        .bind(batch.pool_size as i64)
        .bind(batch.pairs.len() as i64)
        .bind(now)
        .bind(batch.expires_at)
        .execute(&mut *tx)
        .await?;
        for (pos, (query_id, doc_id)) in batch.pairs.iter().enumerate() {
            let inserted = sqlx::query(
                "INSERT INTO label_reservations (query_id, doc_id, batch_id, position, \
                 reserved_by, reserved_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (query_id, doc_id) DO NOTHING",
            )
            .bind(query_id)
            .bind(doc_id)
            .bind(&batch.batch_id)
            .bind(pos as i64 + 1)
            .bind(&batch.assessor)
            .bind(now)
            .bind(batch.expires_at)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                tx.rollback().await?;
                return Ok(Reserved::Conflict);
            }
        }
        tx.commit().await?;
        Ok(Reserved::Done)
    }

    /// Live (unexpired) reservations in batch and pick order, with the total matching.
    pub async fn reservations(
        &self,
        filter: &ReservationFilter,
    ) -> Result<(Vec<Reservation>, i64), sqlx::Error> {
        let now = now_ms();
        let condition = "expires_at > $1 AND ($2 IS NULL OR reserved_by = $2) \
                         AND ($3 IS NULL OR batch_id = $3)";
        let total: i64 = sqlx::query(&format!(
            "SELECT COUNT(*) AS n FROM label_reservations WHERE {condition}"
        ))
        .bind(now)
        .bind(filter.assessor.as_deref())
        .bind(filter.batch_id.as_deref())
        .fetch_one(&self.pool)
        .await?
        .try_get("n")?;
        let rows = sqlx::query(&format!(
            "SELECT query_id, doc_id, batch_id, position, reserved_by, reserved_at, expires_at \
             FROM label_reservations WHERE {condition} \
             ORDER BY reserved_at, batch_id, position LIMIT $4 OFFSET $5"
        ))
        .bind(now)
        .bind(filter.assessor.as_deref())
        .bind(filter.batch_id.as_deref())
        .bind(filter.limit)
        .bind(filter.offset)
        .fetch_all(&self.pool)
        .await?;
        let list = rows
            .iter()
            .map(|r| {
                Ok(Reservation {
                    query_id: r.try_get("query_id")?,
                    doc_id: r.try_get("doc_id")?,
                    batch_id: r.try_get("batch_id")?,
                    position: r.try_get("position")?,
                    reserved_by: r.try_get("reserved_by")?,
                    reserved_at: r.try_get("reserved_at")?,
                    expires_at: r.try_get("expires_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok((list, total))
    }

    /// Releases the remaining reservations of a batch; `None` when no such batch exists.
    pub async fn release_batch(&self, batch_id: &str) -> Result<Option<u64>, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        let known = sqlx::query("SELECT batch_id FROM label_batches WHERE batch_id = $1")
            .bind(batch_id)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if !known {
            return Ok(None);
        }
        let released = sqlx::query("DELETE FROM label_reservations WHERE batch_id = $1")
            .bind(batch_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Some(released))
    }
}
