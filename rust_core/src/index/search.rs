//! The read path: what a search asks for and returns, and how it runs: the two candidate
//! lists ([`super::candidates`]) side by side, then fusion and re-ranking ([`crate::rank`]),
//! page-level grouping and snippets.

use std::collections::{BTreeMap, BTreeSet};

use rust_stemmers::Algorithm;
use rustc_hash::FxHashMap;
use tantivy::query::Query;
use tantivy::schema::Field;
use tantivy::snippet::{collapse_overlapped_ranges, SnippetGenerator};
use tantivy::{DocAddress, Score, Searcher};

use super::cache::SegmentCache;
use super::filter::HitFilter;
use super::{Index, Snapshot};
use crate::doc::Document;
use crate::embed::Embedder;
use crate::error::{CoreError, Result};
use crate::rank::{self, Candidate, RankOptions};
use crate::text::query::{Boosts, Filters, ParsedQuery};
use crate::text::tokenizer;
use crate::vectors::{self, cosine};
use crate::DIM;

/// Which signals a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Tantivy BM25 only.
    Bm25,
    /// Vector similarity only.
    Vector,
    /// Both, fused.
    Hybrid,
}

impl Mode {
    /// Parses `bm25`, `vector` or `hybrid`.
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "bm25" => Ok(Mode::Bm25),
            "vector" => Ok(Mode::Vector),
            "hybrid" => Ok(Mode::Hybrid),
            other => Err(CoreError::invalid(format!(
                "unknown mode {other:?} (expected bm25, vector or hybrid)"
            ))),
        }
    }
}

/// Default of [`SearchOptions::coverage_depth`], chosen on the benchmark's known-item set.
pub const COVERAGE_DEPTH: usize = 2;

/// Default of [`SearchOptions::bm25_candidates`] and [`SearchOptions::vector_candidates`]:
/// deeper pools gave the same known-item quality in `bench/` (see its README), and a
/// shallow BM25 pool lets block-max WAND skip more. A pool grows only when more hits are
/// asked for than it is deep, so requests of up to that many hits rank alike: the top n
/// of each is the top n of one ranking.
pub const FUSION_CANDIDATES: usize = 50;

/// Default of [`SearchOptions::common_word_share`]: the same known-item quality as scoring
/// every word, and faster BM25 on long queries (see `bench/README.md`).
pub const COMMON_WORD_SHARE: f32 = 0.2;

/// Tuning of one search; every field has a tested default.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// BM25 candidates ranked, in every mode (at least `k`). See [`FUSION_CANDIDATES`].
    pub bm25_candidates: usize,
    /// Vector candidates ranked, in every mode (at least `k`).
    pub vector_candidates: usize,
    /// Fusion and re-ranking weights.
    pub rank: RankOptions,
    /// BM25 weight of a title match relative to a body match.
    pub title_boost: f32,
    /// BM25 weight of a match in the section headings relative to a body match.
    pub section_boost: f32,
    /// Weight of the bonus for bodies holding the query's words close together, in order.
    pub proximity_boost: f32,
    /// Leave the query's stop words ("how do I", "what is the") out of scoring
    /// ([`ParsedQuery::drop_stop_words`]); they are never highlighted either way.
    pub drop_stop_words: bool,
    /// Words found in more than this share of the documents are left out of BM25 ranking
    /// ([`ParsedQuery::leave_out_common`]); 1 scores every word. See [`COMMON_WORD_SHARE`].
    pub common_word_share: f32,
    /// How many of the top BM25 documents are read for the query's coverage (the best
    /// share of its words any of them holds; see [`RankOptions`]).
    pub coverage_depth: usize,
    /// One hit per parent (page-level aggregation).
    pub group: bool,
    /// Passages listed per hit when grouping.
    pub passages_per_hit: usize,
    /// HNSW search expansion (0: the index default).
    pub expansion: usize,
    /// Snippet length in characters.
    pub snippet_chars: usize,
    /// Strings placed around matched terms in snippets.
    pub markers: (String, String),
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            bm25_candidates: FUSION_CANDIDATES,
            vector_candidates: FUSION_CANDIDATES,
            rank: RankOptions::default(),
            title_boost: 0.5,
            section_boost: 0.5,
            proximity_boost: 2.0,
            drop_stop_words: true,
            common_word_share: COMMON_WORD_SHARE,
            coverage_depth: COVERAGE_DEPTH,
            group: true,
            passages_per_hit: 3,
            expansion: 0,
            snippet_chars: 200,
            markers: ("**".into(), "**".into()),
        }
    }
}

/// One search.
#[derive(Debug, Clone)]
pub struct SearchRequest<'a> {
    /// What the person typed.
    pub query: &'a str,
    /// Hits wanted.
    pub k: usize,
    /// Restrictions.
    pub filters: Filters,
    /// "Now" for time decay, unix seconds.
    pub now: i64,
    /// Signals used.
    pub mode: Mode,
    /// Query embedding (needed for vector and hybrid modes).
    pub query_vector: Option<&'a [f32]>,
    /// Embeds the query when `query_vector` is `None`, while the BM25 candidates are
    /// gathered.
    pub embedder: Option<&'a Embedder>,
    /// Parent whose documents are excluded (for "similar to this page").
    pub exclude_parent: Option<u64>,
    /// Tuning.
    pub options: SearchOptions,
}

impl SearchOptions {
    /// The field weights of the BM25 query.
    pub fn boosts(&self) -> Boosts {
        Boosts {
            title: self.title_boost,
            section: self.section_boost,
        }
    }
}

impl<'a> SearchRequest<'a> {
    /// A BM25 search for `query` with default options and no filters.
    pub fn bm25(query: &'a str, k: usize) -> SearchRequest<'a> {
        SearchRequest {
            query,
            k,
            filters: Filters::default(),
            now: now(),
            mode: Mode::Bm25,
            query_vector: None,
            embedder: None,
            exclude_parent: None,
            options: SearchOptions::default(),
        }
    }
}

/// The current time in unix seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A passage listed under a hit.
#[derive(Debug, Clone, PartialEq)]
pub struct PassageHit {
    /// Document id.
    pub id: u64,
    /// Snippet with matched terms marked.
    pub snippet: String,
    /// Final score.
    pub score: f32,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The best-scoring document of the hit (its body is not returned).
    pub doc: crate::doc::Document,
    /// Signals and multipliers of that document.
    pub explanation: Candidate,
    /// Snippet of the best document.
    pub snippet: String,
    /// The hit's passages, best first (the first is the hit's own document).
    pub passages: Vec<PassageHit>,
}

struct Pool {
    cands: Vec<Candidate>,
    addrs: Vec<DocAddress>,
    vstamps: Vec<u64>,
    by_id: FxHashMap<u64, usize>,
}

impl Pool {
    fn new() -> Pool {
        Pool {
            cands: Vec::new(),
            addrs: Vec::new(),
            vstamps: Vec::new(),
            by_id: FxHashMap::default(),
        }
    }

    /// The pool index of the document at `addr`, adding it if new.
    fn add(&mut self, index: &Index, snap: &Snapshot, addr: DocAddress) -> Result<usize> {
        let cache = index.segment_cache(&snap.searcher, addr.segment_ord as usize)?;
        let id = SegmentCache::u64_at(&cache.id, addr.doc_id);
        if let Some(&i) = self.by_id.get(&id) {
            return Ok(i);
        }
        let parent = SegmentCache::u64_at(&cache.parent, addr.doc_id);
        let last_seen = cache.last_seen.first(addr.doc_id).unwrap_or(0);
        let visits = SegmentCache::u64_at(&cache.visits, addr.doc_id);
        self.cands
            .push(Candidate::new(id, parent, last_seen, visits));
        self.addrs.push(addr);
        self.vstamps
            .push(SegmentCache::u64_at(&cache.vstamp, addr.doc_id));
        self.by_id.insert(id, self.cands.len() - 1);
        Ok(self.cands.len() - 1)
    }
}

impl Index {
    /// Runs a search on the latest commit.
    pub fn search(&self, req: &SearchRequest<'_>) -> Result<Vec<Hit>> {
        if req.k == 0 {
            return Ok(Vec::new());
        }
        let opts = &req.options;
        let snap = self.snapshot()?;
        let mut analyzer = tokenizer::analyzer();
        let mut parsed = ParsedQuery::parse(req.query, &mut analyzer);
        parsed.add_alternates(req.query, &snap.languages, &snap.searcher, &self.fields);
        let stop = parsed.stop.clone();
        if opts.drop_stop_words {
            parsed.drop_stop_words();
        }
        // The whole query (run when the words cannot be ranked apart, and highlighted in
        // snippets) scores every word.
        let text_query = parsed.to_query(&self.fields, opts.boosts(), opts.proximity_boost);
        parsed.leave_out_common(&snap.searcher, &self.fields, opts.common_word_share);
        let filter = HitFilter::new(&req.filters, &self.fields);

        // The text side: the BM25 candidates and the query's coverage.
        let text_side = |analyzer: &mut tantivy::tokenizer::TextAnalyzer| -> Result<TextSide> {
            let Some(q) = text_query.as_ref().filter(|_| req.mode != Mode::Vector) else {
                return Ok((Vec::new(), 0.0));
            };
            let n = opts.bm25_candidates.max(req.k);
            let top = self.text_top(&snap, &parsed, &**q, filter.as_ref(), n, opts)?;
            let mut coverage = 0.0;
            if req.mode == Mode::Hybrid && opts.rank.coverage_weighting {
                let weights = parsed.word_weights(&snap.searcher, &self.fields);
                for (_, addr) in top.iter().take(opts.coverage_depth) {
                    let c = self.coverage(&snap, *addr, &parsed, &weights, analyzer)?;
                    coverage = f32::max(coverage, c);
                    if coverage >= 1.0 {
                        break;
                    }
                }
            }
            Ok((top, coverage))
        };
        // The vector side: the query vector (embedded here when not given) and the
        // nearest documents.
        let vector_side = || -> Result<Option<VectorSide>> {
            if req.mode == Mode::Bm25 {
                return Ok(None);
            }
            let mut qv = match (req.query_vector, req.embedder) {
                (Some(v), _) => v.to_vec(),
                (None, Some(e)) if !req.query.trim().is_empty() => e.embed_query(req.query)?,
                _ => return Ok(None),
            };
            crate::doc::normalize_vector(&mut qv)?;
            let n = opts.vector_candidates.max(req.k);
            let hits = self.vector_candidates(&snap, &qv, n, filter.as_ref(), opts.expansion)?;
            Ok(Some((qv, hits)))
        };
        // Both sides at once when there are both: on two cores the query embedding and the
        // graph search run beside the BM25 pool.
        let both = req.mode == Mode::Hybrid
            && text_query.is_some()
            && (req.query_vector.is_some() || req.embedder.is_some());
        let ((top, coverage), vector) = if both {
            std::thread::scope(|s| {
                let vector = s.spawn(vector_side);
                let text = text_side(&mut analyzer);
                let vector = vector
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                Ok::<_, CoreError>((text?, vector?))
            })?
        } else {
            (text_side(&mut analyzer)?, vector_side()?)
        };
        if req.mode == Mode::Vector && vector.is_none() {
            return Err(CoreError::invalid(
                "vector search needs a query vector (no embedder is loaded)",
            ));
        }

        let mut pool = Pool::new();
        for (rank, (score, addr)) in top.into_iter().enumerate() {
            let i = pool.add(self, &snap, addr)?;
            pool.cands[i].bm25 = Some((rank + 1, score));
        }
        let qv = match vector {
            Some((qv, hits)) => {
                for (rank, (addr, sim)) in hits.into_iter().enumerate() {
                    let i = pool.add(self, &snap, addr)?;
                    pool.cands[i].vector_rank = Some(rank + 1);
                    pool.cands[i].similarity = Some(sim);
                }
                // Exact similarity for BM25 candidates the graph search did not return.
                for i in 0..pool.cands.len() {
                    if pool.cands[i].similarity.is_none() && pool.vstamps[i] > 0 {
                        let v = vectors::stamped_vector(
                            &snap.segments,
                            pool.cands[i].id,
                            pool.vstamps[i],
                            DIM,
                        )?;
                        pool.cands[i].similarity = v.map(|v| cosine(&qv, &v));
                    }
                }
                Some(qv)
            }
            None => None,
        };
        if let Some(p) = req.exclude_parent {
            let keep: Vec<bool> = pool.cands.iter().map(|c| c.parent != p).collect();
            retain(&mut pool, &keep);
        }
        rank::fuse(&mut pool.cands, &opts.rank, coverage);
        if opts.rank.duplicate_similarity > 0.0 && qv.is_some() {
            let mut vectors = Vec::new();
            for i in rank::duplicate_candidates(&pool.cands) {
                let (id, stamp) = (pool.cands[i].id, pool.vstamps[i]);
                if stamp > 0 {
                    if let Some(v) = vectors::stamped_vector(&snap.segments, id, stamp, DIM)? {
                        vectors.push((i, v));
                    }
                }
            }
            rank::share_duplicates(&mut pool.cands, &vectors, opts.rank.duplicate_similarity);
        }
        rank::finish(&mut pool.cands, &opts.rank, req.now);
        // rank::finish sorted the candidates; realign addresses by id.
        let addr_of: FxHashMap<u64, DocAddress> = pool
            .by_id
            .iter()
            .map(|(&id, &i)| (id, pool.addrs[i]))
            .collect();
        let groups = rank::group(&pool.cands, req.k, opts.group, opts.passages_per_hit);

        let mut terms = match &text_query {
            Some(q) => snippet_terms(&snap.searcher, &**q, self.fields.body)?,
            None => BTreeMap::new(),
        };
        terms.retain(|t, _| !stop.contains(t));
        // One snippet generator per language of the hits, each analysing as its pages were.
        let mut generators: Vec<(Algorithm, SnippetGenerator)> = Vec::new();
        let mut snippet_of = |doc: &Document| {
            if terms.is_empty() {
                return leading_text(&doc.body, opts.snippet_chars);
            }
            let latin = tokenizer::latin_stemmer(&doc.language);
            let at = match generators.iter().position(|(l, _)| *l == latin) {
                Some(at) => at,
                None => {
                    let analyzer = tokenizer::analyzer_for(latin);
                    let chars = opts.snippet_chars.max(20);
                    let g = SnippetGenerator::new(terms.clone(), analyzer, self.fields.body, chars);
                    generators.push((latin, g));
                    generators.len() - 1
                }
            };
            make_snippet(&generators[at].1, &doc.body, opts)
        };
        let mut hits = Vec::with_capacity(groups.len());
        for members in groups {
            let mut passages = Vec::with_capacity(members.len());
            let mut best = None;
            for &m in &members {
                let c = &pool.cands[m];
                let stored = self.stored(&snap, addr_of[&c.id])?;
                let snippet = snippet_of(&stored.doc);
                passages.push(PassageHit {
                    id: c.id,
                    snippet: snippet.clone(),
                    score: c.score,
                });
                if best.is_none() {
                    best = Some((stored.doc, snippet));
                }
            }
            let (mut doc, snippet) = best.expect("groups are never empty");
            doc.body = String::new();
            hits.push(Hit {
                doc,
                explanation: pool.cands[members[0]].clone(),
                snippet,
                passages,
            });
        }
        Ok(hits)
    }

    /// Documents most similar to the stored vector of `id`, excluding its own parent.
    pub fn similar(
        &self,
        id: u64,
        k: usize,
        exclude_parent: bool,
        options: SearchOptions,
    ) -> Result<Vec<Hit>> {
        let Some(doc) = self.get(id)? else {
            return Err(CoreError::invalid(format!("document {id} does not exist")));
        };
        let Some(vector) = doc.vector else {
            return Ok(Vec::new());
        };
        self.search(&SearchRequest {
            query: "",
            k,
            filters: Filters::default(),
            now: 0,
            mode: Mode::Vector,
            query_vector: Some(&vector),
            embedder: None,
            exclude_parent: exclude_parent.then_some(doc.parent),
            options,
        })
    }
}

/// The BM25 candidates (score and address, best first) and the query's coverage.
type TextSide = (Vec<(Score, DocAddress)>, f32);
/// The normalised query vector and the nearest documents with their similarity.
type VectorSide = (Vec<f32>, Vec<(DocAddress, f32)>);

fn retain(pool: &mut Pool, keep: &[bool]) {
    let mut i = 0;
    let mut kept = Pool::new();
    for (((c, a), v), &k) in pool
        .cands
        .drain(..)
        .zip(pool.addrs.drain(..))
        .zip(pool.vstamps.drain(..))
        .zip(keep)
    {
        if k {
            kept.by_id.insert(c.id, i);
            kept.cands.push(c);
            kept.addrs.push(a);
            kept.vstamps.push(v);
            i += 1;
        }
    }
    *pool = kept;
}

/// The terms of `query` in `field` that some document holds, each with the weight
/// tantivy's `SnippetGenerator::create` gives it (rarer terms weigh more).
fn snippet_terms(
    searcher: &Searcher,
    query: &dyn Query,
    field: Field,
) -> Result<BTreeMap<String, Score>> {
    let mut terms = BTreeSet::new();
    query.query_terms(&mut |term, _| {
        if term.field() == field {
            terms.insert(term.clone());
        }
    });
    let mut out = BTreeMap::new();
    for term in terms {
        let Some(text) = term.value().as_str().map(str::to_string) else {
            continue;
        };
        let doc_freq = searcher.doc_freq(&term)?;
        if doc_freq > 0 {
            out.insert(text, 1.0 / (1.0 + doc_freq as Score));
        }
    }
    Ok(out)
}

/// A snippet of `body` with matched terms wrapped in the markers, or its opening words
/// when nothing in it matched (e.g. a vector-only hit). Tantivy cuts its fragment at
/// tokens, which can be inside a word ("enter__()" of "__enter__()"): the fragment is
/// widened to whole words, marked "…" where the passage goes on, and tidied for reading
/// ([`tidy`]).
fn make_snippet(generator: &SnippetGenerator, body: &str, opts: &SearchOptions) -> String {
    let snippet = generator.snippet(body);
    let fragment = snippet.fragment();
    let found = (!snippet.highlighted().is_empty())
        .then(|| body.find(fragment))
        .flatten();
    let Some(start) = found else {
        return tidy(&leading_text(body, opts.snippet_chars));
    };
    let (from, to) = word_bounds(body, start, start + fragment.len());
    let mut out = String::with_capacity(to - from + 16);
    if !body[..from].trim().is_empty() {
        out.push('…');
    }
    let mut at = from;
    // CJK bigrams overlap; merge overlapping and touching ranges first.
    for r in &collapse_overlapped_ranges(snippet.highlighted()) {
        let (s, e) = (start + r.start, start + r.end);
        out.push_str(&body[at..s]);
        out.push_str(&opts.markers.0);
        out.push_str(&body[s..e]);
        out.push_str(&opts.markers.1);
        at = e;
    }
    out.push_str(&body[at..to]);
    if !body[to..].trim().is_empty() {
        out.push('…');
    }
    tidy(&out)
}

/// Longest stretch (in bytes) a snippet is widened by to reach a word's edge; a longer
/// unbroken run (a URL, a hash) is cut where tantivy cut it.
const WIDEN_BYTES: usize = 40;

/// `[start, end)` of `text` widened to the white space before and after it.
fn word_bounds(text: &str, start: usize, end: usize) -> (usize, usize) {
    let from = text[..start]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let to = text[end..]
        .find(char::is_whitespace)
        .map_or(text.len(), |i| end + i);
    (
        if start - from <= WIDEN_BYTES {
            from
        } else {
            start
        },
        if to - end <= WIDEN_BYTES { to } else { end },
    )
}

/// Snippet text for reading: one line, Sphinx's "¶" permalinks gone, and a table's cell
/// pipes ("| a | b |") turned into " · " between cells.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let bare = line.trim().trim_matches('…').trim();
        let table =
            bare.starts_with('|') || bare.ends_with('|') || bare.matches(" | ").count() >= 2;
        for word in line.split_whitespace() {
            let word: String = word.chars().filter(|&c| c != '¶').collect();
            if word.is_empty() {
                continue;
            }
            if table && word.chars().all(|c| c == '|') {
                if !out.is_empty() && !out.ends_with(" ·") && !out.ends_with('…') {
                    out.push_str(" ·");
                }
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&word);
        }
    }
    out.trim_end_matches(" ·").to_string()
}

/// The first `chars` characters of `text`, cut at a word boundary.
fn leading_text(text: &str, chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(chars) {
        None => text.to_string(),
        Some((cut, _)) => {
            let head = &text[..cut];
            let head = head.rfind(char::is_whitespace).map_or(head, |i| &head[..i]);
            format!("{}…", head.trim_end())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_widened_to_whole_words() {
        let text = "call object.__enter__() first";
        let at = text.find("enter").unwrap();
        assert_eq!(word_bounds(text, at, at + 5), (5, 23));
        let long = format!("x {} y", "a".repeat(200));
        assert_eq!(word_bounds(&long, 60, 70), (60, 70));
    }

    #[test]
    fn tidy_drops_permalinks_and_table_pipes() {
        assert_eq!(
            tidy("Utilities¶\nFunctions and classes"),
            "Utilities Functions and classes"
        );
        assert_eq!(
            tidy("| Name | Type |\n| **id** | int |"),
            "Name · Type · **id** · int"
        );
        assert_eq!(tidy("…  ls | grep x…"), "… ls | grep x…");
    }

    #[test]
    fn leading_text_cuts_at_a_word_boundary() {
        assert_eq!(leading_text("hello wonderful world", 12), "hello…");
        assert_eq!(leading_text("short", 12), "short");
    }
}
