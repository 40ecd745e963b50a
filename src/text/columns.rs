//! A document's id, title and URL read from fast-field columns: what a hit and the reranker's
//! URL features need, without decompressing the stored document (a Rust API page's stored
//! body is up to a megabyte; reading whole documents cost 37% of a top-10 query).

use tantivy::columnar::{BytesColumn, StrColumn};
use tantivy::{DocAddress, Searcher};

/// The columns of every segment of one searcher.
pub struct DocColumns {
    segments: Vec<SegmentColumns>,
}

struct SegmentColumns {
    id: Option<StrColumn>,
    title: Option<StrColumn>,
    url: Option<StrColumn>,
    snippet: Option<BytesColumn>,
}

/// What a hit shows of its document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DocHead {
    pub id: String,
    pub title: String,
    pub url: Option<String>,
}

impl DocColumns {
    pub fn new(searcher: &Searcher) -> tantivy::Result<Self> {
        let segments = searcher
            .segment_readers()
            .iter()
            .map(|r| {
                let ff = r.fast_fields();
                Ok(SegmentColumns {
                    id: ff.str("id")?,
                    title: ff.str("title")?,
                    url: ff.str("url")?,
                    snippet: ff.bytes("snippet")?,
                })
            })
            .collect::<tantivy::Result<_>>()?;
        Ok(DocColumns { segments })
    }

    pub fn head(&self, address: DocAddress) -> tantivy::Result<DocHead> {
        let s = &self.segments[address.segment_ord as usize];
        let read = |column: &Option<StrColumn>| -> tantivy::Result<String> {
            let mut out = String::new();
            if let Some(c) = column {
                if let Some(ord) = c.term_ords(address.doc_id).next() {
                    c.ord_to_str(ord, &mut out)?;
                }
            }
            Ok(out)
        };
        let url = read(&s.url)?;
        Ok(DocHead {
            id: read(&s.id)?,
            title: read(&s.title)?,
            url: (!url.is_empty()).then_some(url),
        })
    }

    /// The encoded snippet passages of a document (`crate::text::snippet`) into `out`
    /// (cleared first; left empty for a document without any).
    pub fn snippet(&self, address: DocAddress, out: &mut Vec<u8>) -> tantivy::Result<()> {
        out.clear();
        let s = &self.segments[address.segment_ord as usize];
        if let Some(c) = &s.snippet {
            if let Some(ord) = c.term_ords(address.doc_id).next() {
                c.ord_to_bytes(ord, out)?;
            }
        }
        Ok(())
    }
}
