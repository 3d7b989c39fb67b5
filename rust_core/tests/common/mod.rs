//! Helpers the integration tests share: an index in a directory, pages, searches.
#![allow(dead_code)] // each test crate uses its own share of them

use backtrail_core::{
    Document, Filters, Index, Kind, Mode, OpenOptions, SearchOptions, SearchRequest, DIM,
};

pub fn open(dir: &std::path::Path) -> Index {
    Index::open(dir, OpenOptions::default()).unwrap()
}

pub fn page(id: u64, title: &str, body: &str) -> Document {
    let mut d = Document::new(id, Kind::Passage);
    d.title = title.into();
    d.body = body.into();
    d.url = format!("https://example.org/{id}");
    d.domain = "example.org".into();
    d.first_seen = 1_700_000_000;
    d.last_seen = 1_700_000_000;
    d.visits = 1;
    d
}

/// A unit vector pointing mostly along axis `axis`.
pub fn axis_vector(axis: usize, wobble: f32) -> Vec<f32> {
    let mut v = vec![wobble; DIM];
    v[axis] = 1.0;
    v
}

/// A vector along `axis` with small noise that differs per `seed`. With
/// [`axis_vector`]'s uniform wobble every other vector lies at exactly the same distance
/// from an axis query: a graph search over more of them than its expansion (128) stops
/// among those ties and may miss the one it looks for, which no real embedding does.
pub fn spread_vector(axis: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    let mut v: Vec<f32> = (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.02
        })
        .collect();
    v[axis] = 1.0;
    v
}

pub fn ids(hits: &[backtrail_core::Hit]) -> Vec<u64> {
    hits.iter().map(|h| h.doc.id).collect()
}

pub fn search(index: &Index, q: &str) -> Vec<u64> {
    ids(&index.search(&SearchRequest::bm25(q, 10)).unwrap())
}

pub fn vector_request(v: &[f32], k: usize) -> SearchRequest<'_> {
    SearchRequest {
        query: "",
        k,
        filters: Filters::default(),
        now: 1_700_000_000,
        mode: Mode::Vector,
        query_vector: Some(v),
        embedder: None,
        exclude_parent: None,
        options: SearchOptions::default(),
    }
}
