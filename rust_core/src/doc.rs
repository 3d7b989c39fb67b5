//! The documents the core indexes: what a caller hands in and what `get` hands back.
//!
//! The core knows nothing of browsers; a document is an id, a kind, some text and a few
//! numbers that the ranking uses (when it was seen, how often).

use crate::error::{CoreError, Result};
use crate::DIM;

/// Largest id the core accepts: ids must fit a signed 64-bit integer (SQLite's rowid).
pub const MAX_ID: u64 = i64::MAX as u64;

/// What a document is; stored as a small integer in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A whole web page (often title-only, e.g. from history import).
    Page,
    /// A passage of a page's main text.
    Passage,
    /// Text the user selected and saved.
    Highlight,
    /// A note the user wrote.
    Note,
    /// A browser bookmark.
    Bookmark,
    /// A shared key/value fact.
    Fact,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 6] = [
        Kind::Page,
        Kind::Passage,
        Kind::Highlight,
        Kind::Note,
        Kind::Bookmark,
        Kind::Fact,
    ];

    /// The kind's name as callers spell it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Page => "page",
            Kind::Passage => "passage",
            Kind::Highlight => "highlight",
            Kind::Note => "note",
            Kind::Bookmark => "bookmark",
            Kind::Fact => "fact",
        }
    }

    /// Parses a kind name.
    pub fn parse(name: &str) -> Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                CoreError::invalid(format!(
                    "unknown kind {name:?} (expected one of page, passage, highlight, note, bookmark, fact)"
                ))
            })
    }

    /// The integer stored in the index.
    pub fn code(self) -> u64 {
        self as u64
    }

    /// The kind for a stored integer.
    pub fn from_code(code: u64) -> Option<Kind> {
        Kind::ALL.get(code as usize).copied()
    }
}

/// A document as callers give it to `upsert` and get it back from `get`.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Stable id chosen by the caller, `1..=MAX_ID`.
    pub id: u64,
    /// What the document is.
    pub kind: Kind,
    /// Where it came from (may be empty, e.g. for facts).
    pub url: String,
    /// Host name; domain filters match it and its parent domains.
    pub domain: String,
    /// Title (a page's title, a fact's key, ...).
    pub title: String,
    /// Main text.
    pub body: String,
    /// The headings the text sits under on its page, outermost first (e.g. `Options ›
    /// Connection Options`); searched as a field of its own, empty when none.
    pub section: String,
    /// Grouping key: the page a passage belongs to. Defaults to `id`.
    pub parent: u64,
    /// First time seen, unix seconds.
    pub first_seen: i64,
    /// Last time seen, unix seconds.
    pub last_seen: i64,
    /// Number of visits.
    pub visits: u64,
    /// BCP 47 tag of the text's language (`de`, `pt-br`), empty when unknown: it picks
    /// the stemmer of Latin-script words.
    pub language: String,
    /// Unit-length embedding, or `None` (keep the stored one if the text is unchanged).
    pub vector: Option<Vec<f32>>,
}

impl Document {
    /// A document with the given id and kind and everything else empty.
    pub fn new(id: u64, kind: Kind) -> Document {
        Document {
            id,
            kind,
            url: String::new(),
            domain: String::new(),
            title: String::new(),
            body: String::new(),
            section: String::new(),
            parent: id,
            first_seen: 0,
            last_seen: 0,
            visits: 0,
            language: String::new(),
            vector: None,
        }
    }

    /// Checks the document and normalises what can be normalised (domain case, vector
    /// length, parent default).
    pub fn validate(mut self) -> Result<Document> {
        check_id(self.id)?;
        if self.parent == 0 {
            self.parent = self.id;
        }
        check_id(self.parent)?;
        self.domain = self.domain.trim().trim_end_matches('.').to_lowercase();
        self.language = self.language.trim().to_ascii_lowercase();
        if self.language.len() > 35
            || !self
                .language
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(CoreError::invalid(format!(
                "language {:?} is not a language tag",
                self.language
            )));
        }
        if self.last_seen < self.first_seen {
            self.last_seen = self.first_seen;
        }
        if let Some(v) = self.vector.as_mut() {
            normalize_vector(v)?;
        }
        Ok(self)
    }

    /// A hash of the text the vector is computed from; a changed hash drops the vector.
    pub fn text_hash(&self) -> u64 {
        text_hash(&self.title, &self.section, &self.body)
    }
}

/// Hash of title, section and body (FNV-1a, stable across processes and versions; an
/// empty section hashes as title and body alone did before sections existed).
pub fn text_hash(title: &str, section: &str, body: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let section = (!section.is_empty()).then_some(section.bytes().chain([0xfe]));
    let head = title.bytes().chain([0xff]);
    for b in head
        .chain(section.into_iter().flatten())
        .chain(body.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Rejects ids outside `1..=MAX_ID`.
pub fn check_id(id: u64) -> Result<()> {
    if id == 0 || id > MAX_ID {
        return Err(CoreError::invalid(format!(
            "document id {id} is out of range (1..={MAX_ID})"
        )));
    }
    Ok(())
}

/// Checks a vector's length and values and scales it to unit length.
pub fn normalize_vector(v: &mut [f32]) -> Result<()> {
    if v.len() != DIM {
        return Err(CoreError::invalid(format!(
            "vector has {} dimensions, expected {DIM}",
            v.len()
        )));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(CoreError::invalid("vector contains NaN or infinity"));
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        return Err(CoreError::invalid("vector has zero length"));
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_names_and_codes() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()).unwrap(), k);
            assert_eq!(Kind::from_code(k.code()), Some(k));
        }
        assert!(Kind::parse("tab").is_err());
    }

    #[test]
    fn validate_rejects_zero_and_huge_ids() {
        assert!(Document::new(0, Kind::Page).validate().is_err());
        assert!(Document::new(MAX_ID + 1, Kind::Page).validate().is_err());
        assert_eq!(Document::new(7, Kind::Page).validate().unwrap().parent, 7);
    }

    #[test]
    fn validate_normalises_vectors_and_rejects_bad_ones() {
        let mut d = Document::new(1, Kind::Note);
        d.vector = Some(vec![2.0; DIM]);
        let v = d.validate().unwrap().vector.unwrap();
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);

        let mut short = Document::new(1, Kind::Note);
        short.vector = Some(vec![1.0; 3]);
        assert!(short.validate().is_err());
        let mut nan = Document::new(1, Kind::Note);
        nan.vector = Some(vec![f32::NAN; DIM]);
        assert!(nan.validate().is_err());
    }

    #[test]
    fn text_hash_changes_with_title_or_body() {
        assert_ne!(text_hash("a", "", "b"), text_hash("ab", "", ""));
        assert_eq!(text_hash("a", "", "b"), text_hash("a", "", "b"));
        assert_ne!(text_hash("a", "s", "b"), text_hash("a", "", "b"));
    }
}
