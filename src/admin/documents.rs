//! Document batches from the admin API: NDJSON records parsed by the ingest code
//! (`crate::corpus::jsonl`) and committed as one batch, and deletes by id. Either every record
//! of a batch is indexed or, on any bad record, none is.

use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::Term;

use crate::text::TextIndex;

pub use crate::corpus::jsonl::parse_batch;

/// Whether a live (not deleted) document has this id. `doc_freq` would count deleted
/// documents until their segment is merged, so this runs a query instead.
pub fn exists(index: &TextIndex, id: &str) -> anyhow::Result<bool> {
    let query = TermQuery::new(
        Term::from_field_text(index.fields.id, id),
        IndexRecordOption::Basic,
    );
    Ok(index.reader.searcher().search(&query, &Count)? > 0)
}

/// The first id (with its position) that is not a live document of `index`.
pub fn first_missing<'a>(
    index: &TextIndex,
    ids: impl IntoIterator<Item = &'a str>,
) -> anyhow::Result<Option<(usize, &'a str)>> {
    for (i, id) in ids.into_iter().enumerate() {
        if !exists(index, id)? {
            return Ok(Some((i, id)));
        }
    }
    Ok(None)
}
