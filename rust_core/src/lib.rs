//! Backtrail's search core: a library with no knowledge of browsers, MCP or SQLite.
//!
//! One index directory holds Tantivy segments (BM25 over titles and bodies), immutable
//! usearch vector segments, and a manifest carried in Tantivy's commit payload. Many
//! processes open the same directory; each commit runs under a cross-process lock and is
//! atomic for text and vectors together. Searches fuse BM25 and vector candidates, weigh
//! them by recency and visits, and fold passages into one hit per page.
//!
//! ```
//! use backtrail_core::{Document, Index, Kind, Op, OpenOptions, SearchRequest};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let index = Index::open(dir.path(), OpenOptions::default()).unwrap();
//! let mut doc = Document::new(1, Kind::Note);
//! doc.body = "Remember to rotate the API token on Friday".into();
//! index.stage([Op::Upsert(doc)]).unwrap();
//! index.commit(Some("ledger:1".into())).unwrap();
//! let hits = index.search(&SearchRequest::bm25("rotating tokens", 10)).unwrap();
//! assert_eq!(hits[0].doc.id, 1);
//! assert_eq!(index.watermark().unwrap().as_deref(), Some("ledger:1"));
//! ```

pub mod doc;
pub mod embed;
pub mod error;
pub mod fsutil;
pub mod index;
pub mod lock;
pub mod manifest;
pub mod rank;
pub mod text;
pub mod vectors;

#[cfg(feature = "python")]
mod py;

pub use doc::{Document, Kind, MAX_ID};
pub use embed::{Embedder, EmbedderConfig};
pub use error::{CoreError, Result};
pub use index::{
    Hit, Index, IndexStats, Mode, Op, OpenOptions, PassageHit, SearchOptions, SearchRequest,
};
pub use manifest::Quantization;
pub use rank::{Fusion, RankOptions};
pub use text::query::Filters;

/// Embedding dimensions of all-MiniLM-L6-v2.
pub const DIM: usize = 384;
