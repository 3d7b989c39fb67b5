//! The Tantivy side of the index: schema, document conversion, query construction and
//! snippets. Tantivy holds every document's text and attributes; the vectors live in
//! `vectors/` and are tied to documents by the `vstamp` field.

pub mod query;
pub mod stopwords;
pub mod tokenizer;

use rust_stemmers::Algorithm;
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, Value, FAST,
    INDEXED, STORED, STRING,
};
use tantivy::tokenizer::{PreTokenizedString, TextAnalyzer, TokenStream};
use tantivy::{TantivyDocument, Term};

use crate::doc::{Document, Kind};

/// Handles of every field in the schema.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// Stable document id (indexed for lookups and deletes, fast for id maps).
    pub id: Field,
    /// Kind code.
    pub kind: Field,
    /// Grouping key (the page of a passage).
    pub parent: Field,
    /// Exact URL.
    pub url: Field,
    /// Exact host name.
    pub domain: Field,
    /// The host and each parent domain, for filters and deletes that include subdomains.
    pub site: Field,
    /// Analysed title.
    pub title: Field,
    /// Analysed body.
    pub body: Field,
    /// Analysed section headings: the path of headings a passage sits under.
    pub section: Field,
    /// First seen, unix seconds.
    pub first_seen: Field,
    /// Last seen, unix seconds.
    pub last_seen: Field,
    /// Visit count.
    pub visits: Field,
    /// Stamp of the commit that wrote this document's vector, 0 when it has none.
    pub vstamp: Field,
    /// Hash of title, section and body, to know whether a stored vector still fits the
    /// text.
    pub thash: Field,
    /// Language tag, which picked the stemmer of the title and body.
    pub lang: Field,
}

impl Fields {
    /// Builds the schema and its field handles.
    pub fn schema() -> (Schema, Fields) {
        let mut b = Schema::builder();
        let num = NumericOptions::default();
        let text = TextOptions::default().set_stored().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer::ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let fields = Fields {
            id: b.add_u64_field("id", num.clone().set_indexed().set_fast().set_stored()),
            kind: b.add_u64_field("kind", num.clone().set_indexed().set_fast().set_stored()),
            parent: b.add_u64_field("parent", num.clone().set_indexed().set_fast().set_stored()),
            url: b.add_text_field("url", STRING | STORED),
            domain: b.add_text_field("domain", STRING | STORED),
            site: b.add_text_field("site", STRING),
            title: b.add_text_field("title", text.clone()),
            body: b.add_text_field("body", text.clone()),
            section: b.add_text_field("section", text),
            first_seen: b.add_i64_field("first_seen", INDEXED | FAST | STORED),
            last_seen: b.add_i64_field("last_seen", INDEXED | FAST | STORED),
            visits: b.add_u64_field("visits", FAST | STORED),
            vstamp: b.add_u64_field("vstamp", FAST | STORED),
            thash: b.add_u64_field("thash", FAST | STORED),
            lang: b.add_text_field("lang", STRING | STORED),
        };
        (b.build(), fields)
    }

    /// The Tantivy document for `doc`, whose vector (if any) carries `vstamp`.
    pub fn to_tantivy(&self, doc: &Document, vstamp: u64) -> TantivyDocument {
        let mut t = TantivyDocument::default();
        t.add_u64(self.id, doc.id);
        t.add_u64(self.kind, doc.kind.code());
        t.add_u64(self.parent, doc.parent);
        t.add_text(self.url, &doc.url);
        t.add_text(self.domain, &doc.domain);
        for suffix in domain_suffixes(&doc.domain) {
            t.add_text(self.site, suffix);
        }
        let latin = tokenizer::latin_stemmer(&doc.language);
        let texts = [
            (self.title, &doc.title),
            (self.body, &doc.body),
            (self.section, &doc.section),
        ];
        if latin == Algorithm::English {
            for (field, text) in texts {
                t.add_text(field, text);
            }
        } else {
            // The field's registered analyzer is English: give the tokens of the page's own.
            let mut analyzer = tokenizer::analyzer_for(latin);
            for (field, text) in texts {
                t.add_pre_tokenized_text(field, pre_tokenized(&mut analyzer, text));
            }
        }
        if !doc.language.is_empty() {
            t.add_text(self.lang, &doc.language);
        }
        t.add_i64(self.first_seen, doc.first_seen);
        t.add_i64(self.last_seen, doc.last_seen);
        t.add_u64(self.visits, doc.visits);
        t.add_u64(self.vstamp, vstamp);
        t.add_u64(self.thash, doc.text_hash());
        t
    }

    /// A stored document back as a [`Document`] (without its vector), its vector stamp
    /// and its text hash.
    pub fn from_tantivy(&self, t: &TantivyDocument) -> StoredDoc {
        let u = |f: Field| t.get_first(f).and_then(|v| v.as_u64()).unwrap_or(0);
        let i = |f: Field| t.get_first(f).and_then(|v| v.as_i64()).unwrap_or(0);
        let s = |f: Field| {
            // A document not yet stored holds pre-tokenized text as such.
            let v = t.get_first(f);
            v.and_then(|v| v.as_str().map(str::to_string))
                .or_else(|| v.and_then(|v| v.as_pre_tokenized_text()).map(|p| p.text))
                .unwrap_or_default()
        };
        let mut doc = Document::new(
            u(self.id),
            Kind::from_code(u(self.kind)).unwrap_or(Kind::Page),
        );
        doc.parent = u(self.parent);
        doc.url = s(self.url);
        doc.domain = s(self.domain);
        doc.title = s(self.title);
        doc.body = s(self.body);
        doc.section = s(self.section);
        doc.first_seen = i(self.first_seen);
        doc.last_seen = i(self.last_seen);
        doc.visits = u(self.visits);
        doc.language = s(self.lang);
        StoredDoc {
            doc,
            vstamp: u(self.vstamp),
            thash: u(self.thash),
        }
    }

    /// The term that identifies a document.
    pub fn id_term(&self, id: u64) -> Term {
        Term::from_field_u64(self.id, id)
    }
}

/// `text` with its tokens as `analyzer` makes them.
fn pre_tokenized(analyzer: &mut TextAnalyzer, text: &str) -> PreTokenizedString {
    let mut stream = analyzer.token_stream(text);
    let mut tokens = Vec::new();
    while stream.advance() {
        tokens.push(stream.token().clone());
    }
    PreTokenizedString {
        text: text.to_string(),
        tokens,
    }
}

/// A document read back from the index.
#[derive(Debug, Clone)]
pub struct StoredDoc {
    /// The document's fields (its `vector` is always `None`).
    pub doc: Document,
    /// Stamp of its vector, 0 if none.
    pub vstamp: u64,
    /// Hash of the text its vector was computed from.
    pub thash: u64,
}

/// `docs.python.org` → `docs.python.org`, `python.org`, `org`.
pub fn domain_suffixes(domain: &str) -> impl Iterator<Item = &str> {
    let domain = domain.trim_matches('.');
    let starts = std::iter::once(0).chain(domain.match_indices('.').map(|(i, _)| i + 1));
    starts
        .filter(move |_| !domain.is_empty())
        .map(move |i| &domain[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_suffixes_list_the_host_and_its_parents() {
        let s: Vec<_> = domain_suffixes("docs.python.org").collect();
        assert_eq!(s, ["docs.python.org", "python.org", "org"]);
        assert_eq!(domain_suffixes("").count(), 0);
    }

    #[test]
    fn documents_round_trip_through_tantivy() {
        let (_, f) = Fields::schema();
        let mut d = Document::new(42, Kind::Passage);
        d.parent = 7;
        d.url = "https://example.org/a".into();
        d.domain = "example.org".into();
        d.title = "Title".into();
        d.body = "Body text".into();
        d.section = "Usage › Options".into();
        d.first_seen = 10;
        d.last_seen = 20;
        d.visits = 3;
        d.language = "de".into();
        let back = f.from_tantivy(&f.to_tantivy(&d, 5));
        assert_eq!(back.doc, d);
        assert_eq!(back.vstamp, 5);
        assert_eq!(back.thash, d.text_hash());
    }
}
