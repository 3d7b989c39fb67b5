//! Turning what a person types into a Tantivy query, without a query language that could
//! fail on punctuation: words are OR-ed (BM25 ranks documents matching more of them
//! higher), a "quoted phrase" is required, and filters restrict without scoring.

use std::ops::Bound;

use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, RangeQuery, TermQuery,
    TermSetQuery,
};
use tantivy::schema::IndexRecordOption;
use tantivy::tokenizer::{TextAnalyzer, TokenStream};
use tantivy::{Searcher, Term};

use rust_stemmers::Algorithm;

use super::{stopwords, tokenizer, Fields};
use crate::doc::Kind;

/// Restrictions on which documents a search may return.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    /// Only these kinds (empty: any).
    pub kinds: Vec<Kind>,
    /// Only these domains or their subdomains (empty: any).
    pub domains: Vec<String>,
    /// Only documents last seen at or after this time (unix seconds).
    pub since: Option<i64>,
    /// Only documents last seen before this time (unix seconds).
    pub until: Option<i64>,
}

impl Filters {
    /// True when nothing is restricted.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
            && self.domains.is_empty()
            && self.since.is_none()
            && self.until.is_none()
    }

    /// The filters as a query matching every allowed document, or `None` if unrestricted.
    pub fn query(&self, f: &Fields) -> Option<Box<dyn Query>> {
        let mut must: Vec<Box<dyn Query>> = Vec::new();
        if !self.kinds.is_empty() {
            let terms = self
                .kinds
                .iter()
                .map(|k| Term::from_field_u64(f.kind, k.code()));
            must.push(Box::new(TermSetQuery::new(terms)));
        }
        if let Some(domains) = self.domains_query(f) {
            must.push(domains);
        }
        if let Some(range) = time_range(f, self.since, self.until) {
            must.push(range);
        }
        match must.len() {
            0 => None,
            1 => must.pop(),
            _ => Some(Box::new(BooleanQuery::intersection(must))),
        }
    }

    /// The domain restriction alone as a query (`site` is indexed but not a fast field,
    /// so hits are checked against it through its postings), or `None`.
    pub fn domains_query(&self, f: &Fields) -> Option<Box<dyn Query>> {
        if self.domains.is_empty() {
            return None;
        }
        let terms = self.domains.iter().map(|d| {
            Term::from_field_text(f.site, d.trim().trim_matches('.').to_lowercase().as_str())
        });
        Some(Box::new(TermSetQuery::new(terms)))
    }
}

/// Documents whose `last_seen` is in `[since, until)`, or `None` when both are open.
pub fn time_range(f: &Fields, since: Option<i64>, until: Option<i64>) -> Option<Box<dyn Query>> {
    if since.is_none() && until.is_none() {
        return None;
    }
    let lower = since.map_or(Bound::Unbounded, |s| {
        Bound::Included(Term::from_field_i64(f.last_seen, s))
    });
    let upper = until.map_or(Bound::Unbounded, |u| {
        Bound::Excluded(Term::from_field_i64(f.last_seen, u))
    });
    Some(Box::new(RangeQuery::new(lower, upper)))
}

/// The analysed terms of a query: loose words and required phrases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedQuery {
    /// Distinct analysed words, in order of appearance.
    pub words: Vec<String>,
    /// Each quoted phrase as its analysed tokens.
    pub phrases: Vec<Vec<String>>,
    /// The unquoted tokens in order, repeats kept: a document holding them close
    /// together gets a proximity bonus.
    pub sequence: Vec<String>,
    /// Words left out of BM25 scoring ([`ParsedQuery::leave_out_common`]).
    pub common: Vec<String>,
    /// Words that carry no content ([`stopwords::is_stop_word`]): never highlighted, and
    /// left out of scoring by [`ParsedQuery::drop_stop_words`]. Empty when every word is
    /// one (a query of nothing else keeps them all).
    pub stop: Vec<String>,
    /// Stop words [`ParsedQuery::drop_stop_words`] took out of `words`; the proximity
    /// bonus skips them, keeping the other words' positions (so "make a context manager"
    /// is still the closest match of "how do I make a context manager").
    pub dropped: Vec<String>,
    /// Each word's other stems, in the order of `words`: its stem in each other language
    /// the index holds, where that differs and some document holds it
    /// ([`ParsedQuery::add_alternates`]). A document holding any form holds the word.
    pub alternates: Vec<Vec<String>>,
    /// Each phrase's tokens in those languages, where they differ.
    pub phrase_alternates: Vec<Vec<Vec<String>>>,
}

/// Largest gap (in positions, summed) a loose phrase match tolerates.
pub const PROXIMITY_SLOP: u32 = 2;

impl ParsedQuery {
    /// Splits `text` on double quotes and analyses each part.
    pub fn parse(text: &str, analyzer: &mut TextAnalyzer) -> ParsedQuery {
        let mut parsed = ParsedQuery::default();
        for (i, part) in text.split('"').enumerate() {
            let tokens = analyse(part, analyzer);
            // Odd parts were inside quotes (an unclosed quote runs to the end).
            if i % 2 == 1 && tokens.len() > 1 {
                parsed.phrases.push(tokens);
                continue;
            }
            for t in tokens {
                parsed.sequence.push(t.clone());
                if !parsed.words.contains(&t) {
                    parsed.words.push(t);
                }
            }
        }
        parsed.stop = parsed
            .words
            .iter()
            .filter(|w| stopwords::is_stop_word(w))
            .cloned()
            .collect();
        if parsed.stop.len() == parsed.words.len() {
            parsed.stop.clear();
        }
        parsed
    }

    /// Takes the stop words out of `words` (and their other stems out of `alternates`),
    /// so that BM25, the query's coverage and the proximity bonus score content words
    /// only. Quoted phrases keep every word.
    pub fn drop_stop_words(&mut self) {
        if self.stop.is_empty() {
            return;
        }
        let keep: Vec<bool> = self.words.iter().map(|w| !self.stop.contains(w)).collect();
        let mut i = 0;
        self.words.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        if self.alternates.len() == keep.len() {
            let mut i = 0;
            self.alternates.retain(|_| {
                i += 1;
                keep[i - 1]
            });
        }
        self.dropped = std::mem::take(&mut self.stop);
    }

    /// Adds the stems `text`'s words have in each of `languages` (Latin-script stemmers
    /// other than English, the ones the index's pages use), so a query finds a page
    /// stemmed in its own language whatever language the query is in.
    pub fn add_alternates(
        &mut self,
        text: &str,
        languages: &[Algorithm],
        searcher: &Searcher,
        f: &Fields,
    ) {
        self.alternates = vec![Vec::new(); self.words.len()];
        self.phrase_alternates = vec![Vec::new(); self.phrases.len()];
        let held = |w: &str| {
            [f.body, f.title, f.section].into_iter().any(|field| {
                searcher
                    .doc_freq(&Term::from_field_text(field, w))
                    .is_ok_and(|df| df > 0)
            })
        };
        for &language in languages {
            let other = ParsedQuery::parse(text, &mut tokenizer::analyzer_for(language));
            // The same tokens but for the stemmer, so the sequences align.
            if other.sequence.len() != self.sequence.len()
                || other.phrases.len() != self.phrases.len()
            {
                continue;
            }
            for (mine, theirs) in self.sequence.iter().zip(&other.sequence) {
                let Some(i) = self.words.iter().position(|w| w == mine) else {
                    continue;
                };
                if !self.words.contains(theirs)
                    && !self.alternates[i].contains(theirs)
                    && held(theirs)
                {
                    self.alternates[i].push(theirs.clone());
                }
            }
            for (i, (mine, theirs)) in self.phrases.iter().zip(other.phrases).enumerate() {
                if *mine != theirs && !self.phrase_alternates[i].contains(&theirs) {
                    self.phrase_alternates[i].push(theirs);
                }
            }
        }
    }

    /// The word at `i` in each of its forms: itself, then its alternates.
    pub fn forms(&self, i: usize) -> impl Iterator<Item = &String> {
        let alternates = self.alternates.get(i).map_or(&[][..], Vec::as_slice);
        std::iter::once(&self.words[i]).chain(alternates)
    }

    /// Leaves out of BM25 scoring the words found in more than `max_share` of the
    /// documents `searcher` sees ("the", "of", "is" in English text): their weight is
    /// near zero, so they change almost no ranking, yet their postings are the longest to
    /// score. A query made only of such words keeps them all. They still count for the
    /// query's coverage, and the proximity bonus still asks for them between the other
    /// words.
    pub fn leave_out_common(&mut self, searcher: &Searcher, f: &Fields, max_share: f32) {
        let docs = searcher.num_docs();
        if max_share >= 1.0 || docs == 0 || self.words.is_empty() {
            return;
        }
        let limit = (f64::from(max_share) * docs as f64) as u64;
        let common: Vec<String> = self
            .words
            .iter()
            .filter(|w| {
                searcher
                    .doc_freq(&Term::from_field_text(f.body, w))
                    .is_ok_and(|df| df > limit)
            })
            .cloned()
            .collect();
        if common.len() < self.words.len() {
            self.common = common;
        }
    }

    /// Each word's weight in the query's coverage, in the order of `words`: BM25's
    /// inverse document frequency of the word (in all its forms) in bodies (tantivy's own
    /// formula, which it keeps private), so the common words a wrong page happens to hold
    /// count for little (a long paraphrase shares many of them with pages it does not
    /// describe).
    pub fn word_weights(&self, searcher: &Searcher, f: &Fields) -> Vec<f32> {
        let docs = searcher.num_docs() as f32;
        (0..self.words.len())
            .map(|i| {
                let df: u64 = self
                    .forms(i)
                    .map(|w| {
                        let term = Term::from_field_text(f.body, w);
                        searcher.doc_freq(&term).unwrap_or(0)
                    })
                    .sum();
                let df = df as f32;
                (1.0 + (docs - df + 0.5) / (df + 0.5)).ln()
            })
            .collect()
    }

    /// True when there is nothing to search for.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.phrases.is_empty()
    }

    /// The BM25 query: each word in the body or (boosted) the title or section headings,
    /// plus a bonus (`proximity_boost`) for bodies holding the words close together, in
    /// order ([`ParsedQuery::proximity_query`]); quoted phrases are required. (Scoring
    /// the bonus only on the best documents by words alone was slower at equal quality:
    /// it needs a deep pool of them to keep the known-item MRR; see `bench/README.md`.)
    pub fn to_query(
        &self,
        f: &Fields,
        boosts: Boosts,
        proximity_boost: f32,
    ) -> Option<Box<dyn Query>> {
        let mut clauses = self.word_clauses(f, boosts);
        if let Some(bonus) = self.bonus(f, proximity_boost) {
            clauses.push((Occur::Should, bonus));
        }
        for (i, p) in self.phrases.iter().enumerate() {
            let alternates = self.phrase_alternates.get(i).map_or(&[][..], Vec::as_slice);
            let forms: Vec<(Occur, Box<dyn Query>)> = std::iter::once(p)
                .chain(alternates)
                .map(|tokens| {
                    let terms = tokens.iter().map(|t| Term::from_field_text(f.body, t));
                    let q: Box<dyn Query> = Box::new(PhraseQuery::new(terms.collect()));
                    (Occur::Should, q)
                })
                .collect();
            let phrase = if forms.len() == 1 {
                forms.into_iter().next().map(|(_, q)| q)
            } else {
                disjunction(forms)
            };
            clauses.extend(phrase.map(|q| (Occur::Must, q)));
        }
        if clauses.is_empty() {
            return None;
        }
        Some(Box::new(BooleanQuery::new(clauses)))
    }

    /// The words alone: each in the body or (boosted) the title. A pure disjunction of
    /// terms, which tantivy ranks with block-max WAND (skipping documents that cannot
    /// reach the top). None without words.
    pub fn words_query(&self, f: &Fields, boosts: Boosts) -> Option<Box<dyn Query>> {
        disjunction(self.word_clauses(f, boosts))
    }

    /// The words [`ParsedQuery::leave_out_common`] left out, as the clauses
    /// [`ParsedQuery::words_query`] would score them with (each word in the body and in
    /// the title); their scores summed are the words' score. Empty when there are none.
    pub fn common_clauses(&self, f: &Fields, boosts: Boosts) -> Vec<Box<dyn Query>> {
        self.clauses_of(f, boosts, true)
            .into_iter()
            .map(|(_, q)| q)
            .collect()
    }

    /// The documents earning the proximity bonus, scored as [`ParsedQuery::to_query`]
    /// scores them (bonus plus words). None when there is no bonus to earn.
    pub fn near_query(
        &self,
        f: &Fields,
        boosts: Boosts,
        proximity_boost: f32,
    ) -> Option<Box<dyn Query>> {
        let bonus = self.bonus(f, proximity_boost)?;
        let mut clauses = self.word_clauses(f, boosts);
        clauses.push((Occur::Must, bonus));
        Some(Box::new(BooleanQuery::new(clauses)))
    }

    /// The proximity clause weighted by `proximity_boost`; None when it earns nothing.
    fn bonus(&self, f: &Fields, proximity_boost: f32) -> Option<Box<dyn Query>> {
        if proximity_boost <= 0.0 {
            return None;
        }
        let near = self.proximity_query(f)?;
        Some(Box::new(BoostQuery::new(Box::new(near), proximity_boost)))
    }

    /// The clauses of the words scored in WAND: all but the common ones.
    fn word_clauses(&self, f: &Fields, boosts: Boosts) -> Vec<(Occur, Box<dyn Query>)> {
        self.clauses_of(f, boosts, false)
    }

    /// The clauses of every form of the common words, or of the others.
    fn clauses_of(&self, f: &Fields, boosts: Boosts, common: bool) -> Vec<(Occur, Box<dyn Query>)> {
        let forms = (0..self.words.len())
            .filter(|&i| self.common.contains(&self.words[i]) == common)
            .flat_map(|i| self.forms(i));
        word_clauses(f, forms, boosts)
    }

    /// For two or more words: the query matching bodies that hold them in order within
    /// [`PROXIMITY_SLOP`] positions — what makes a remembered phrase win. Its score, times
    /// the proximity boost, is added to a document's BM25 score.
    fn proximity_query(&self, f: &Fields) -> Option<PhraseQuery> {
        if self.sequence.len() > 32 {
            return None;
        }
        let terms: Vec<(usize, Term)> = self
            .sequence
            .iter()
            .enumerate()
            .filter(|(_, t)| !self.dropped.contains(t))
            .map(|(i, t)| (i, Term::from_field_text(f.body, t)))
            .collect();
        if terms.len() < 2 {
            return None;
        }
        Some(PhraseQuery::new_with_offset_and_slop(terms, PROXIMITY_SLOP))
    }
}

/// How much a word found in the title or in the section headings weighs against the
/// same word in the body (0: those fields are not searched).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Boosts {
    /// Weight of the title field.
    pub title: f32,
    /// Weight of the section field (the headings a passage sits under).
    pub section: f32,
}

/// Each word in the body, or (boosted) in the title or the section headings.
fn word_clauses<'a>(
    f: &Fields,
    words: impl IntoIterator<Item = &'a String>,
    boosts: Boosts,
) -> Vec<(Occur, Box<dyn Query>)> {
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for w in words {
        clauses.push((Occur::Should, term(f.body, w)));
        for (field, boost) in [(f.title, boosts.title), (f.section, boosts.section)] {
            if boost > 0.0 {
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(term(field, w), boost)),
                ));
            }
        }
    }
    clauses
}

/// Any of `clauses`, or None without any.
fn disjunction(clauses: Vec<(Occur, Box<dyn Query>)>) -> Option<Box<dyn Query>> {
    (!clauses.is_empty()).then(|| Box::new(BooleanQuery::new(clauses)) as Box<dyn Query>)
}

fn term(field: tantivy::schema::Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::WithFreqs,
    ))
}

fn analyse(text: &str, analyzer: &mut TextAnalyzer) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// Combines a scoring query with a non-scoring filter.
pub fn filtered(query: Box<dyn Query>, filter: Option<Box<dyn Query>>) -> Box<dyn Query> {
    match filter {
        None => query,
        Some(filter) => Box::new(BooleanQuery::new(vec![
            (Occur::Must, query),
            (Occur::Must, Box::new(ConstScoreQuery::new(filter, 0.0))),
        ])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::tokenizer::analyzer;

    #[test]
    fn words_are_analysed_and_deduplicated() {
        let p = ParsedQuery::parse(
            "Running run RUNS: (weird) [syntax] title:x",
            &mut analyzer(),
        );
        assert_eq!(p.words, ["run", "weird", "syntax", "titl", "x"]);
        assert!(p.phrases.is_empty());
    }

    #[test]
    fn quoted_parts_become_phrases() {
        let p = ParsedQuery::parse("vacuum \"full table scan\" \"one\"", &mut analyzer());
        assert_eq!(p.words, ["vacuum", "one"]);
        assert_eq!(p.phrases, [vec!["full", "tabl", "scan"]]);
    }

    #[test]
    fn stop_words_are_marked_and_dropped() {
        let mut p = ParsedQuery::parse("how do I make a context manager", &mut analyzer());
        assert_eq!(p.stop, ["how", "do", "i", "a"]);
        p.drop_stop_words();
        assert_eq!(p.words, ["make", "context", "manag"]);
        assert_eq!(p.dropped, ["how", "do", "i", "a"]);
        let (_, f) = Fields::schema();
        let near = p.proximity_query(&f).expect("three content words");
        assert_eq!(near.phrase_terms().len(), 3);
        let only = ParsedQuery::parse("how do I", &mut analyzer());
        assert!(only.stop.is_empty(), "a query of stop words keeps them");
    }

    #[test]
    fn punctuation_only_queries_are_empty() {
        let p = ParsedQuery::parse(" ?!* \"\" ", &mut analyzer());
        assert!(p.is_empty());
        let (_, f) = Fields::schema();
        let boosts = Boosts {
            title: 1.0,
            section: 1.0,
        };
        assert!(p.to_query(&f, boosts, 1.0).is_none());
        assert!(p.proximity_query(&f).is_none());
    }
}
