//! Operator-reviewed TrustRank seeds (SPEC §2.5): the graph job computes TrustRank from these
//! documents when there are any.

use sqlx::Row;

use super::{now_ms, rfc3339, Db};

impl Db {
    /// Seeds in id order, with the time each was added (RFC 3339).
    pub async fn seeds(&self) -> Result<Vec<(String, String)>, sqlx::Error> {
        let rows = sqlx::query("SELECT doc_id, added_at FROM trustrank_seeds ORDER BY doc_id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("doc_id")?, rfc3339(r.try_get("added_at")?))))
            .collect()
    }

    /// Adds seeds in one transaction; ids already present are kept as they were. Returns how
    /// many were new.
    pub async fn add_seeds(&self, ids: &[String]) -> Result<u64, sqlx::Error> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let mut added = 0;
        for id in ids {
            added += sqlx::query(
                "INSERT INTO trustrank_seeds (doc_id, added_at) VALUES ($1, $2) \
                 ON CONFLICT (doc_id) DO NOTHING",
            )
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(added)
    }

    /// Removes one seed; false if it was not a seed.
    pub async fn delete_seed(&self, id: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("DELETE FROM trustrank_seeds WHERE doc_id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
