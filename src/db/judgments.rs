//! Relevance judgments and query texts. TREC qrels name queries only by id, so a query's text
//! lives in its own table (`queries`) and may arrive before or after its judgments; evaluation
//! runs the queries that have both.

use sqlx::Row;

use super::{now_ms, rfc3339, Db};

/// One graded (query, document) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgment {
    pub query_id: String,
    pub doc_id: String,
    pub grade: i32,
    /// Who judged: `api`, `qrels`, a labeller's name, ...
    pub source: String,
}

/// A stored judgment with its query text (if known) and time.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredJudgment {
    pub judgment: Judgment,
    pub query: Option<String>,
    pub created_at: i64,
}

/// A judgment as `GET /admin/judgments` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct JudgmentView {
    pub query_id: String,
    /// the query's text, when known
    pub query: Option<String>,
    pub doc_id: String,
    pub grade: i32,
    /// who judged: `api`, `qrels`, a labeller's name, ...
    pub source: String,
    /// RFC 3339
    pub created_at: String,
}

impl StoredJudgment {
    pub fn view(&self) -> JudgmentView {
        let j = &self.judgment;
        JudgmentView {
            query_id: j.query_id.clone(),
            query: self.query.clone(),
            doc_id: j.doc_id.clone(),
            grade: j.grade,
            source: j.source.clone(),
            created_at: rfc3339(self.created_at),
        }
    }
}

/// Which judgments to list.
#[derive(Debug, Clone, Default)]
pub struct JudgmentFilter {
    pub query_id: Option<String>,
    pub limit: i64,
    pub offset: i64,
}

impl Db {
    /// Stores query texts and judgments in one transaction: all of them or, on error, none.
    /// A judgment of an already judged pair replaces its grade and source; a text of a known
    /// query id replaces the text. A judged pair's label reservation, if any, is released.
    pub async fn store_judgments(
        &self,
        queries: &[(String, String)],
        judgments: &[Judgment],
    ) -> Result<(), sqlx::Error> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        for (id, text) in queries {
            sqlx::query(
                "INSERT INTO queries (query_id, text, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (query_id) DO UPDATE SET text = excluded.text",
            )
            .bind(id)
            .bind(text)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        for j in judgments {
            sqlx::query(
                "INSERT INTO judgments (query_id, doc_id, grade, source, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (query_id, doc_id) DO UPDATE \
                 SET grade = excluded.grade, source = excluded.source, \
                 created_at = excluded.created_at",
            )
            .bind(&j.query_id)
            .bind(&j.doc_id)
            .bind(i64::from(j.grade))
            .bind(&j.source)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            // A judged pair is no longer waiting for its assessor (SPEC §5).
            sqlx::query("DELETE FROM label_reservations WHERE query_id = $1 AND doc_id = $2")
                .bind(&j.query_id)
                .bind(&j.doc_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }

    /// The stored text of a query, if any.
    pub async fn query_text(&self, query_id: &str) -> Result<Option<String>, sqlx::Error> {
        sqlx::query("SELECT text FROM queries WHERE query_id = $1")
            .bind(query_id)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.try_get("text"))
            .transpose()
    }

    /// Judgments ordered by query and document, with the total number matching the filter.
    pub async fn judgments(
        &self,
        filter: &JudgmentFilter,
    ) -> Result<(Vec<StoredJudgment>, i64), sqlx::Error> {
        let total: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM judgments WHERE ($1 IS NULL OR query_id = $1)")
                .bind(filter.query_id.as_deref())
                .fetch_one(&self.pool)
                .await?
                .try_get("n")?;
        let rows = sqlx::query(
            "SELECT j.query_id, q.text, j.doc_id, j.grade, j.source, j.created_at \
             FROM judgments j LEFT JOIN queries q ON q.query_id = j.query_id \
             WHERE ($1 IS NULL OR j.query_id = $1) \
             ORDER BY j.query_id, j.doc_id LIMIT $2 OFFSET $3",
        )
        .bind(filter.query_id.as_deref())
        .bind(filter.limit)
        .bind(filter.offset)
        .fetch_all(&self.pool)
        .await?;
        let list = rows
            .iter()
            .map(|r| {
                Ok(StoredJudgment {
                    judgment: Judgment {
                        query_id: r.try_get("query_id")?,
                        doc_id: r.try_get("doc_id")?,
                        grade: r.try_get::<i64, _>("grade")? as i32,
                        source: r.try_get("source")?,
                    },
                    query: r.try_get("text")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok((list, total))
    }

    /// Every judgment with its query text, for evaluation.
    pub async fn all_judgments(&self) -> Result<Vec<StoredJudgment>, sqlx::Error> {
        let filter = JudgmentFilter {
            query_id: None,
            limit: i64::MAX,
            offset: 0,
        };
        Ok(self.judgments(&filter).await?.0)
    }
}
