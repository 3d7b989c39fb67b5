//! The read path: BM25 and vector candidates, fusion and re-ranking, page-level grouping,
//! snippets.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use rustc_hash::{FxHashMap, FxHashSet};
use tantivy::query::{EnableScoring, Query, Scorer};
use tantivy::snippet::SnippetGenerator;
use tantivy::DocSet;
use tantivy::{DocAddress, Score, Searcher};

use super::cache::SegmentCache;
use super::{Index, Snapshot};
use crate::embed::Embedder;
use crate::error::{CoreError, Result};
use crate::rank::{self, Candidate, RankOptions};
use crate::text::query::{filtered, Filters, ParsedQuery};
use crate::text::tokenizer;
use crate::text::Fields;
use crate::vectors::{self, cosine, Found};
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

/// Default of [`SearchOptions::bm25_candidates`] and [`SearchOptions::vector_candidates`].
/// On the benchmark's known-item set (real pages), pools of 30, 50, 100 and 200 of each
/// gave the same page MRR@10 (0.720-0.721). A shallow BM25 pool lets block-max WAND skip
/// more: at 1M passages a hybrid search given its query vector took 10.7 ms (p50) with
/// pools of 50 against 15.8 ms with 200.
pub const FUSION_CANDIDATES: usize = 50;

/// Default of [`SearchOptions::common_word_share`]. On the benchmark's known-item set,
/// shares of 0.5 and 0.2 gave the same MRR@10 as scoring every word (BM25 0.710, hybrid
/// 0.721; 0.1 lost a little), and at 1M passages 0.2 cut the BM25 p50 of lexical and
/// paraphrase queries by about 40%.
pub const COMMON_WORD_SHARE: f32 = 0.2;

/// With common words left out, how many times the wanted BM25 candidates are ranked by
/// the other words before the common words' scores are added.
const COMMON_RESCORE_DEPTH: usize = 2;

/// Tuning of one search; every field has a tested default.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// BM25 candidates considered for fusion (at least `3 * k`; BM25-only mode takes
    /// `3 * k`). See [`FUSION_CANDIDATES`].
    pub bm25_candidates: usize,
    /// Vector candidates considered for fusion (at least `3 * k`; vector-only mode takes
    /// `3 * k`).
    pub vector_candidates: usize,
    /// Fusion and re-ranking weights.
    pub rank: RankOptions,
    /// BM25 weight of a title match relative to a body match.
    pub title_boost: f32,
    /// Weight of the bonus for bodies holding the query's words close together, in order.
    pub proximity_boost: f32,
    /// Words found in more than this share of the documents are left out of BM25 scoring
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
            proximity_boost: 2.0,
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
        // The whole query (run when the words cannot be ranked apart, and highlighted in
        // snippets) scores every word.
        let text_query = parsed.to_query(&self.fields, opts.title_boost, opts.proximity_boost);
        parsed.leave_out_common(&snap.searcher, &self.fields, opts.common_word_share);
        let filter = HitFilter::new(&req.filters, &self.fields);
        // Freed by the vector side's thread when it is done, for the BM25 side to share.
        let spare = SpareCore::none();

        // The text side: the BM25 candidates and the query's coverage.
        let text_side = |analyzer: &mut tantivy::tokenizer::TextAnalyzer| -> Result<TextSide> {
            let Some(q) = text_query.as_ref().filter(|_| req.mode != Mode::Vector) else {
                return Ok((Vec::new(), 0.0));
            };
            // Fusion needs a deep pool; BM25-only ranking just re-orders its top few by
            // recency and visits.
            let n = match req.mode {
                Mode::Bm25 => req.k * 3,
                _ => opts.bm25_candidates.max(req.k * 3),
            };
            let top = self.text_top(&snap, &parsed, &**q, filter.as_ref(), n, opts, &spare)?;
            let mut coverage = 0.0;
            if req.mode == Mode::Hybrid && opts.rank.coverage_weighting {
                for (_, addr) in top.iter().take(opts.coverage_depth) {
                    let c = self.coverage(&snap, *addr, &parsed.words, analyzer)?;
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
            // Fusion needs a deep pool; vector-only ranking just re-orders its top few by
            // recency and visits, so a wide beam would only cost time.
            let n = match req.mode {
                Mode::Vector => req.k * 3,
                _ => opts.vector_candidates.max(req.k * 3),
            };
            let hits = self.vector_candidates(&snap, &qv, n, filter.as_ref(), opts.expansion)?;
            Ok(Some((qv, hits)))
        };
        // Both sides at once when there are both: on two cores the query embedding and the
        // graph search take about as long as the BM25 pool, and when they end first their
        // thread takes a share of the BM25 side's remaining segments.
        let both = req.mode == Mode::Hybrid
            && text_query.is_some()
            && (req.query_vector.is_some() || req.embedder.is_some());
        let ((top, coverage), vector) = if both {
            std::thread::scope(|s| {
                let vector = s.spawn(|| {
                    let vector = vector_side();
                    spare.give_back();
                    vector
                });
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

        let snippets = match &text_query {
            Some(q) => {
                let mut g = SnippetGenerator::create(&snap.searcher, &**q, self.fields.body)?;
                g.set_max_num_chars(opts.snippet_chars.max(20));
                Some(g)
            }
            None => None,
        };
        let mut hits = Vec::with_capacity(groups.len());
        for members in groups {
            let mut passages = Vec::with_capacity(members.len());
            let mut best = None;
            for &m in &members {
                let c = &pool.cands[m];
                let stored = self.stored(&snap, addr_of[&c.id])?;
                let snippet = make_snippet(snippets.as_ref(), &stored.doc.body, opts);
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

    /// Share of `words` that occur in the title or body of the document at `addr`.
    fn coverage(
        &self,
        snap: &Snapshot,
        addr: DocAddress,
        words: &[String],
        analyzer: &mut tantivy::tokenizer::TextAnalyzer,
    ) -> Result<f32> {
        if words.is_empty() {
            return Ok(0.0);
        }
        let doc = self.stored(snap, addr)?.doc;
        let mut found = FxHashSet::default();
        for text in [&doc.title, &doc.body] {
            let mut stream = analyzer.token_stream(text);
            while let Some(t) = tantivy::tokenizer::TokenStream::next(&mut stream) {
                found.insert(t.text.clone());
            }
        }
        let hits = words.iter().filter(|w| found.contains(w.as_str())).count();
        Ok(hits as f32 / words.len() as f32)
    }

    /// The best `n` documents for `full`, the BM25 query of `parsed` (words plus the
    /// proximity bonus, [`ParsedQuery::to_query`]), best first, among those `filter`
    /// accepts.
    ///
    /// Its bonus clause keeps tantivy from pruning, so `full` itself scores every document
    /// holding any of the words. Instead the words alone are ranked with block-max WAND,
    /// and the documents earning the bonus (each holds every word of the sequence, an
    /// intersection) are ranked apart with their full score. That merge is exact: a
    /// document in neither list scores its words alone, below `n` documents of the
    /// words' list whose full scores are at least that.
    ///
    /// Words too common to rank ([`ParsedQuery::leave_out_common`]) are left out of both
    /// lists, which are then twice as long ([`COMMON_RESCORE_DEPTH`]), and their scores
    /// are added to the documents in the lists. That is not exact: a document outside the
    /// lists that only the common words would lift into the top is missed. On the
    /// benchmark's known-item queries it changed no MRR@10 (see [`COMMON_WORD_SHARE`]).
    /// When fewer documents than that hold the other words, every word is scored.
    ///
    /// Filters are checked on the hits, as most keep most documents (a default search
    /// leaves out only facts); only when too few survive is the filtered query run whole.
    ///
    /// The rankings share their segments with a second thread once `spare` frees the other
    /// core ([`top_by_score`]).
    #[allow(clippy::too_many_arguments)]
    fn text_top(
        &self,
        snap: &Snapshot,
        parsed: &ParsedQuery,
        full: &dyn Query,
        filter: Option<&HitFilter>,
        n: usize,
        opts: &SearchOptions,
        spare: &SpareCore,
    ) -> Result<Vec<(Score, DocAddress)>> {
        let whole = || -> Result<Vec<(Score, DocAddress)>> {
            let q = filtered(full.box_clone(), filter.map(|f| f.query.box_clone()));
            top_by_score(&snap.searcher, &*q, n, spare)
        };
        let words = match parsed.words_query(&self.fields, opts.title_boost) {
            Some(words) if parsed.phrases.is_empty() => words,
            _ => return whole(),
        };
        let ask = if filter.is_some() { with_spares(n) } else { n };
        let common = parsed.common_clauses(&self.fields, opts.title_boost);
        let pool = if !common.is_empty() {
            ask * COMMON_RESCORE_DEPTH
        } else {
            ask
        };
        let by_words = top_by_score(&snap.searcher, &*words, pool, spare)?;
        let complete = by_words.len() < pool;
        if complete && !common.is_empty() {
            // Too few documents hold the other words to leave the common ones out: in a
            // small store, or for a rare word, documents holding only common words count.
            let every = ParsedQuery {
                common: Vec::new(),
                ..parsed.clone()
            };
            return self.text_top(snap, &every, full, filter, n, opts, spare);
        }
        let mut best: FxHashMap<DocAddress, Score> =
            by_words.into_iter().map(|(s, a)| (a, s)).collect();
        if let Some(near) = parsed.near_query(&self.fields, opts.title_boost, opts.proximity_boost)
        {
            for (s, a) in top_by_score(&snap.searcher, &*near, pool, spare)? {
                let e = best.entry(a).or_insert(s);
                *e = e.max(s);
            }
        }
        let mut merged: Vec<(Score, DocAddress)> = best.into_iter().map(|(a, s)| (s, a)).collect();
        // One clause at a time: a term's scorer seeks through its skip list, where their
        // union would decode every posting of these longest lists near each document.
        for clause in &common {
            add_scores(&snap.searcher, &**clause, &mut merged)?;
        }
        merged.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        merged.truncate(ask);
        let Some(f) = filter else {
            merged.truncate(n);
            return Ok(merged);
        };
        let kept = self.first_matching(snap, f, merged, |h| h.1, n)?;
        if kept.len() >= n || complete {
            return Ok(kept);
        }
        whole()
    }

    /// Nearest documents to `query`, each checked against the document's current vector
    /// stamp so replaced and deleted vectors never surface.
    fn vector_candidates(
        &self,
        snap: &Snapshot,
        query: &[f32],
        n: usize,
        filter: Option<&HitFilter>,
        expansion: usize,
    ) -> Result<Vec<(DocAddress, f32)>> {
        let expansion = if expansion > 0 {
            expansion
        } else {
            self.options.expansion_search
        };
        // Each segment returns some spare hits for those that turn out superseded.
        let found = self.graph_hits(snap, query, with_spares(n), expansion)?;
        let Some(f) = filter else {
            return self.place(snap, found, n, None);
        };
        // Most filters keep most documents (a default search leaves out only facts):
        // search the graphs as if unfiltered and drop what the filter refuses. Only when
        // too few remain is the allowed set collected (a pass over every matching
        // document, ~20 ms at 100k pages) and searched within.
        let kept = if f.domains.is_none() {
            self.place(snap, found, n, Some(f))?
        } else {
            let placed = self.place(snap, found, usize::MAX, Some(f))?;
            self.first_matching(snap, f, placed, |h| h.0, n)?
        };
        if kept.len() >= n {
            return Ok(kept);
        }
        let mut found: Vec<Found> = Vec::new();
        let allowed = self.live_vector_stamps(snap, Some(&*f.query))?;
        if allowed.len() <= EXACT_SCAN_LIMIT {
            for (&key, &stamp) in &allowed {
                if let Some(v) = vectors::stamped_vector(&snap.segments, key, stamp, DIM)? {
                    found.push((key, cosine(query, &v), stamp));
                }
            }
        } else {
            for seg in &snap.segments {
                let _slot = self.slots.acquire();
                found.extend(seg.filtered_search(query, n, |key| {
                    allowed
                        .get(&key)
                        .is_some_and(|&st| seg.stamp_of(key) == Some(st))
                })?);
            }
        }
        self.place(snap, found, n, None)
    }

    /// `(key, similarity, stamp)` of the nearest `ask` vectors of every segment.
    fn graph_hits(
        &self,
        snap: &Snapshot,
        query: &[f32],
        ask: usize,
        expansion: usize,
    ) -> Result<Vec<Found>> {
        let mut found = Vec::new();
        let total: usize = snap.segments.iter().map(|s| s.len()).sum();
        for seg in &snap.segments {
            let _slot = self.slots.acquire();
            let ask = segment_ask(ask, seg.len(), total);
            found.extend(seg.search(query, ask, expansion)?);
        }
        Ok(found)
    }

    /// The best `n` of `found` that are live documents still carrying the vector's stamp
    /// (and pass the column checks of `columns`), best first, each once.
    fn place(
        &self,
        snap: &Snapshot,
        mut found: Vec<Found>,
        n: usize,
        columns: Option<&HitFilter>,
    ) -> Result<Vec<(DocAddress, f32)>> {
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = Vec::with_capacity(n.min(found.len()));
        let mut seen = FxHashSet::default();
        for (key, sim, stamp) in found {
            if out.len() == n {
                break;
            }
            if !seen.insert(key) {
                continue;
            }
            let Some(addr) = self.resolve(snap, key)? else {
                continue;
            };
            let cache = self.segment_cache(&snap.searcher, addr.segment_ord as usize)?;
            if SegmentCache::u64_at(&cache.vstamp, addr.doc_id) != stamp {
                seen.remove(&key);
            } else if columns.is_none_or(|f| f.column_allows(&cache, addr.doc_id)) {
                out.push((addr, sim));
            }
        }
        Ok(out)
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

/// Below this many allowed documents, a filtered vector search scores them exactly.
const EXACT_SCAN_LIMIT: usize = 2_000;

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

/// A snippet of `body` with matched terms wrapped in the markers, or its opening words
/// when nothing in it matched (e.g. a vector-only hit).
fn make_snippet(generator: Option<&SnippetGenerator>, body: &str, opts: &SearchOptions) -> String {
    if let Some(g) = generator {
        let snippet = g.snippet(body);
        let fragment = snippet.fragment();
        if !snippet.highlighted().is_empty() {
            let mut out = String::with_capacity(fragment.len() + 16);
            let mut at = 0;
            // CJK bigrams overlap; merge overlapping and touching ranges first.
            let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
            for r in snippet.highlighted() {
                match ranges.last_mut() {
                    Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                    _ => ranges.push(r.clone()),
                }
            }
            for r in &ranges {
                out.push_str(&fragment[at..r.start]);
                out.push_str(&opts.markers.0);
                out.push_str(&fragment[r.start..r.end]);
                out.push_str(&opts.markers.1);
                at = r.end;
            }
            out.push_str(&fragment[at..]);
            return out.trim().to_string();
        }
    }
    leading_text(body, opts.snippet_chars)
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

/// How many of the `ask` nearest vectors to take from a segment holding `len` of the
/// `total` vectors. Its share of the nearest is about its share of the vectors: twice
/// that, plus [`SEGMENT_ASK_MIN`], leaves room for a segment holding more than its share
/// of a topic, and spares the beam width (search cost grows with it) of every graph when
/// a store has several.
fn segment_ask(ask: usize, len: usize, total: usize) -> usize {
    if total == 0 {
        return ask;
    }
    let share = (ask as f64 * len as f64 / total as f64 * 2.0).ceil() as usize;
    (share + SEGMENT_ASK_MIN).min(ask)
}

/// Fewest nearest vectors asked of any segment ([`segment_ask`]).
const SEGMENT_ASK_MIN: usize = 20;

/// Adds `query`'s score of each document to its score (nothing where it does not match),
/// seeking each segment's scorer through the documents in order.
fn add_scores(
    searcher: &Searcher,
    query: &dyn Query,
    hits: &mut [(Score, DocAddress)],
) -> Result<()> {
    let weight = query.weight(EnableScoring::enabled_from_searcher(searcher))?;
    let mut order: Vec<usize> = (0..hits.len()).collect();
    order.sort_by_key(|&i| hits[i].1);
    let mut scorer: Option<(u32, Box<dyn Scorer>)> = None;
    for i in order {
        let addr = hits[i].1;
        if scorer.as_ref().map(|s| s.0) != Some(addr.segment_ord) {
            let reader = searcher.segment_reader(addr.segment_ord);
            scorer = Some((addr.segment_ord, weight.scorer(reader, 1.0)?));
        }
        let Some((_, s)) = scorer.as_mut() else {
            continue;
        };
        let mut doc = s.doc();
        if doc < addr.doc_id {
            doc = s.seek(addr.doc_id);
        }
        if doc == addr.doc_id {
            hits[i].0 += s.score();
        }
    }
    Ok(())
}

/// The best `n` documents for `query`, best first (ties: lower address first): what
/// tantivy's `TopDocs::with_limit(n).order_by_score()` finds, with one threshold shared by
/// all segments.
///
/// Tantivy starts block-max WAND afresh in every segment, so an index of nine segments
/// gathers nine whole top-`n` lists. Here the largest segment goes first, and each next
/// one only scores documents that can still enter the overall top `n`.
///
/// When `spare` frees the other core between two segments, a second thread takes the
/// remaining segments with this one. Each thread keeps its own best `n` and prunes below
/// the higher of both thresholds (a document below either thread's `n`-th best is not in
/// the overall top `n`), so the result is the same as on one thread.
pub(crate) fn top_by_score(
    searcher: &Searcher,
    query: &dyn Query,
    n: usize,
    spare: &SpareCore,
) -> Result<Vec<(Score, DocAddress)>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let weight = query.weight(EnableScoring::enabled_from_searcher(searcher))?;
    let readers = searcher.segment_readers();
    let mut order: Vec<usize> = (0..readers.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(readers[i].num_docs()));
    let next = AtomicUsize::new(0);
    let shared = SharedThreshold::default();
    let score_segment = |ord: usize, top: &mut TopN| -> Result<()> {
        let reader = &readers[ord];
        let alive = reader.alive_bitset();
        let segment = u32::try_from(ord).expect("fewer than 2^32 segments");
        let start = shared.get().max(top.threshold());
        weight.for_each_pruning(start, reader, &mut |doc, score| {
            if !alive.is_some_and(|a| a.is_deleted(doc)) {
                top.push(score, DocAddress::new(segment, doc));
                shared.raise(top.threshold());
            }
            shared.get().max(top.threshold())
        })?;
        Ok(())
    };
    let take = || order.get(next.fetch_add(1, Ordering::Relaxed)).copied();
    let mut top = TopN::new(n);
    std::thread::scope(|s| -> Result<()> {
        let mut helper = None;
        while let Some(ord) = take() {
            if helper.is_none() && next.load(Ordering::Relaxed) < order.len() && spare.take() {
                helper = Some(s.spawn(|| -> Result<TopN> {
                    let mut own = TopN::new(n);
                    while let Some(ord) = take() {
                        score_segment(ord, &mut own)?;
                    }
                    Ok(own)
                }));
            }
            score_segment(ord, &mut top)?;
        }
        if let Some(helper) = helper {
            let own = helper
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            spare.give_back();
            for Ranked(score, address) in own?.heap {
                top.push(score, address);
            }
        }
        Ok(())
    })?;
    Ok(top.into_sorted())
}

/// The other core of a search that runs its two sides on two threads: free once the
/// vector side has finished, for the BM25 side to share its segments with
/// ([`top_by_score`]).
#[derive(Default)]
pub(crate) struct SpareCore(AtomicBool);

impl SpareCore {
    /// A core that is never free (a search on one thread).
    pub(crate) fn none() -> SpareCore {
        SpareCore::default()
    }

    /// Marks the core free.
    pub(crate) fn give_back(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Takes the core if it is free.
    fn take(&self) -> bool {
        self.0
            .compare_exchange(true, false, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
}

/// The highest pruning threshold of the threads ranking one query's segments. Scores are
/// never negative, so a threshold's bits order like its value; 0 means none yet.
#[derive(Default)]
struct SharedThreshold(AtomicU32);

impl SharedThreshold {
    fn get(&self) -> Score {
        match self.0.load(Ordering::Relaxed) {
            0 => Score::MIN,
            bits => Score::from_bits(bits - 1),
        }
    }

    fn raise(&self, threshold: Score) {
        if threshold.is_sign_positive() {
            self.0.fetch_max(threshold.to_bits() + 1, Ordering::Relaxed);
        }
    }
}

/// A hit of [`TopN`], ordered best first: higher score, then lower address.
#[derive(Clone, Copy, PartialEq)]
struct Ranked(Score, DocAddress);

impl Eq for Ranked {}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The `n` best hits seen so far (a heap whose top is the worst of them).
struct TopN {
    n: usize,
    heap: std::collections::BinaryHeap<Ranked>,
}

impl TopN {
    fn new(n: usize) -> TopN {
        TopN {
            n,
            heap: std::collections::BinaryHeap::with_capacity(n + 1),
        }
    }

    fn push(&mut self, score: Score, address: DocAddress) {
        let hit = Ranked(score, address);
        if self.heap.len() < self.n {
            self.heap.push(hit);
        } else if self.heap.peek().is_some_and(|worst| hit < *worst) {
            self.heap.pop();
            self.heap.push(hit);
        }
    }

    /// Scores above this can still enter (tantivy passes on only scores above it): just
    /// below the worst kept score once `n` are kept, so a tie can still win on address.
    fn threshold(&self) -> Score {
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.n => worst.0.next_down(),
            _ => Score::MIN,
        }
    }

    fn into_sorted(self) -> Vec<(Score, DocAddress)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Ranked(s, a)| (s, a))
            .collect()
    }
}

/// `n` plus room for hits that a filter or a stamp check will drop.
fn with_spares(n: usize) -> usize {
    n + n / 2 + 8
}

/// A search's filters, checked on single hits: kinds and the time range on the
/// fast-field columns (cheap per hit, where the kinds' query would first collect every
/// document of those kinds), domains through their query (`site` has no column).
pub(crate) struct HitFilter {
    /// All the filters as one query, for searches run within the allowed set.
    query: Box<dyn Query>,
    /// Allowed kind codes as bits (`None`: any kind).
    kinds: Option<u64>,
    since: Option<i64>,
    until: Option<i64>,
    domains: Option<Box<dyn Query>>,
}

impl HitFilter {
    /// The filter of `filters`, or `None` when they restrict nothing.
    pub(crate) fn new(filters: &Filters, fields: &Fields) -> Option<HitFilter> {
        let query = filters.query(fields)?;
        let kinds = (!filters.kinds.is_empty()).then(|| {
            filters
                .kinds
                .iter()
                .fold(0u64, |bits, k| bits | 1 << k.code())
        });
        Some(HitFilter {
            query,
            kinds,
            since: filters.since,
            until: filters.until,
            domains: filters.domains_query(fields),
        })
    }

    fn column_allows(&self, cache: &SegmentCache, doc: tantivy::DocId) -> bool {
        if let Some(bits) = self.kinds {
            match cache.kind.first(doc) {
                Some(code) if code < 64 && bits & (1 << code) != 0 => {}
                _ => return false,
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(seen) = cache.last_seen.first(doc) else {
                return false;
            };
            if self.since.is_some_and(|s| seen < s) || self.until.is_some_and(|u| seen >= u) {
                return false;
            }
        }
        true
    }
}

impl Index {
    /// The first `n` of `hits` (best first) that `filter` allows.
    fn first_matching<T>(
        &self,
        snap: &Snapshot,
        filter: &HitFilter,
        hits: Vec<T>,
        addr: impl Fn(&T) -> DocAddress,
        n: usize,
    ) -> Result<Vec<T>> {
        let keep = self.allowed(snap, filter, &hits.iter().map(addr).collect::<Vec<_>>())?;
        Ok(hits
            .into_iter()
            .zip(keep)
            .filter_map(|(hit, keep)| keep.then_some(hit))
            .take(n)
            .collect())
    }

    /// Which of `hits` `filter` allows.
    fn allowed(
        &self,
        snap: &Snapshot,
        filter: &HitFilter,
        hits: &[DocAddress],
    ) -> Result<Vec<bool>> {
        let mut caches: Vec<Option<std::sync::Arc<SegmentCache>>> =
            vec![None; snap.searcher.segment_readers().len()];
        let mut keep = Vec::with_capacity(hits.len());
        for hit in hits {
            let slot = &mut caches[hit.segment_ord as usize];
            if slot.is_none() {
                *slot = Some(self.segment_cache(&snap.searcher, hit.segment_ord as usize)?);
            }
            let cache = slot.as_deref().expect("filled above");
            keep.push(filter.column_allows(cache, hit.doc_id));
        }
        if let Some(domains) = &filter.domains {
            let still: Vec<usize> = (0..hits.len()).filter(|&i| keep[i]).collect();
            let addrs: Vec<DocAddress> = still.iter().map(|&i| hits[i]).collect();
            for (i, ok) in still
                .into_iter()
                .zip(filter_matches(snap, &**domains, &addrs)?)
            {
                keep[i] = ok;
            }
        }
        Ok(keep)
    }
}

/// Which of `hits` the filter query matches (one pass per segment, seeking in doc order).
fn filter_matches(snap: &Snapshot, filter: &dyn Query, hits: &[DocAddress]) -> Result<Vec<bool>> {
    let weight = filter.weight(EnableScoring::disabled_from_searcher(&snap.searcher))?;
    let mut order: Vec<usize> = (0..hits.len()).collect();
    order.sort_unstable_by_key(|&i| (hits[i].segment_ord, hits[i].doc_id));
    let mut keep = vec![false; hits.len()];
    let mut at = 0;
    while at < order.len() {
        let ord = hits[order[at]].segment_ord;
        let mut docs = weight.scorer(snap.searcher.segment_reader(ord), 1.0)?;
        while at < order.len() && hits[order[at]].segment_ord == ord {
            let i = order[at];
            let doc = hits[i].doc_id;
            if docs.doc() < doc {
                docs.seek(doc);
            }
            keep[i] = docs.doc() == doc;
            at += 1;
        }
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    use tantivy::collector::TopDocs;

    use crate::doc::{Document, Kind};
    use crate::index::{Op, OpenOptions};

    /// Queries over [`corpus`]'s vocabulary: common and rare words, runs in order.
    const QUERIES: [&str; 7] = [
        "w1 w2",
        "w3 w1 w7",
        "w0 w1 w2 w3",
        "w12 w30 w2 w5 w1",
        "w38 w39",
        "w2",
        "w5 w6 w7 w8 w9 w10",
    ];

    /// Pseudo-random documents over a small vocabulary, some holding word runs in order,
    /// staged and committed in `commits` parts (one segment each).
    fn corpus_in(index: &Index, commits: usize) {
        let vocab: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let mut seed = 7u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) % m as u64) as usize
        };
        let ops: Vec<Op> = (1..=600u64)
            .map(|id| {
                let len = 5 + next(60);
                // Zipf-like: low-numbered words are common, like "the" and "of".
                let words: Vec<&str> = (0..len)
                    .map(|_| {
                        let spread = 1 + next(vocab.len());
                        vocab[next(spread)].as_str()
                    })
                    .collect();
                let kind = if id % 10 == 0 {
                    Kind::Fact
                } else {
                    Kind::Passage
                };
                let mut d = Document::new(id, kind);
                d.last_seen = (id % 7) as i64 * 1000;
                d.title = words[..2].join(" ");
                d.body = words.join(" ");
                d.url = format!("https://example.org/{id}");
                d.domain = if id % 50 == 0 {
                    "rare.org"
                } else {
                    "example.org"
                }
                .into();
                Op::Upsert(d)
            })
            .collect::<Vec<_>>();
        for part in ops.chunks(ops.len().div_ceil(commits)) {
            index.stage(part.to_vec()).unwrap();
            index.commit(None).unwrap();
        }
    }

    /// `got` ranks like `want`: the same scores (up to the summation order of another
    /// WAND path) and the same documents, apart from ties at the cut.
    fn assert_same_top(got: &[(Score, DocAddress)], want: &[(Score, DocAddress)], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(want) {
            assert!((g.0 - w.0).abs() < 1e-4, "{what}: {got:?} vs {want:?}");
        }
        let cut = want.last().map_or(0.0, |w| w.0);
        let above = |v: &[(Score, DocAddress)]| {
            let mut a: Vec<DocAddress> =
                v.iter().filter(|h| h.0 > cut + 1e-4).map(|h| h.1).collect();
            a.sort();
            a
        };
        assert_eq!(above(got), above(want), "{what}");
    }

    #[test]
    fn a_threshold_shared_by_the_segments_finds_what_tantivy_finds() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path(), OpenOptions::default()).unwrap();
        corpus_in(&index, 5);
        // deleted and replaced documents leave dead rows in the older segments
        index
            .stage(vec![Op::DeleteIds((1..=600).step_by(7).collect())])
            .unwrap();
        index.commit(None).unwrap();
        let snap = index.snapshot().unwrap();
        assert!(snap.searcher.segment_readers().len() >= 5);
        assert!(snap
            .searcher
            .segment_readers()
            .iter()
            .any(|r| r.alive_bitset().is_some()));
        let opts = SearchOptions::default();
        let mut compared = 0;
        for q in &QUERIES[..6] {
            let parsed = ParsedQuery::parse(q, &mut tokenizer::analyzer());
            let words = parsed.words_query(&index.fields, opts.title_boost).unwrap();
            let full = parsed
                .to_query(&index.fields, opts.title_boost, opts.proximity_boost)
                .unwrap();
            for query in [&*words, &*full] {
                for n in [1, 3, 10, 30, 200, 1000] {
                    let want = snap
                        .searcher
                        .search(query, &TopDocs::with_limit(n).order_by_score())
                        .unwrap();
                    let got = top_by_score(&snap.searcher, query, n, &SpareCore::none()).unwrap();
                    assert_same_top(&got, &want, &format!("{q:?} n={n}"));
                    // A second thread shares the segments from the first one on.
                    let free = SpareCore::none();
                    free.give_back();
                    let shared = top_by_score(&snap.searcher, query, n, &free).unwrap();
                    assert_same_top(&shared, &want, &format!("two threads: {q:?} n={n}"));
                    assert!(free.take(), "the core is given back");
                    assert!(
                        got.windows(2)
                            .all(|p| p[0].0 > p[1].0 || (p[0].0 == p[1].0 && p[0].1 < p[1].1)),
                        "best first, ties by address: {got:?}"
                    );
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, 6 * 2 * 6);
    }

    #[test]
    fn words_and_bonus_ranked_apart_equal_the_whole_query() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path(), OpenOptions::default()).unwrap();
        corpus_in(&index, 3);
        let snap = index.snapshot().unwrap();
        assert!(snap.searcher.segment_readers().len() >= 2);
        let opts = SearchOptions::default();
        let most = Filters {
            kinds: vec![Kind::Passage],
            ..Filters::default()
        };
        let few = Filters {
            domains: vec!["rare.org".into()],
            ..Filters::default()
        };
        let recent_passages = Filters {
            kinds: vec![Kind::Passage, Kind::Note],
            since: Some(2000),
            until: Some(6000),
            ..Filters::default()
        };
        let recent_rare = Filters {
            domains: vec!["rare.org".into(), "nowhere.net".into()],
            since: Some(3000),
            ..Filters::default()
        };
        let mut compared = 0;
        for q in QUERIES {
            let parsed = ParsedQuery::parse(q, &mut tokenizer::analyzer());
            let full = parsed
                .to_query(&index.fields, opts.title_boost, opts.proximity_boost)
                .unwrap();
            for filters in [
                Filters::default(),
                most.clone(),
                few.clone(),
                recent_passages.clone(),
                recent_rare.clone(),
            ] {
                let filter = filters.query(&index.fields);
                let hit_filter = HitFilter::new(&filters, &index.fields);
                for n in [3, 10, 30] {
                    let whole = filtered(full.box_clone(), filter.as_ref().map(|f| f.box_clone()));
                    let want = snap
                        .searcher
                        .search(&*whole, &TopDocs::with_limit(n).order_by_score())
                        .unwrap();
                    // The searches for 10 share their segments with a second thread.
                    let spare = SpareCore::none();
                    if n == 10 {
                        spare.give_back();
                    }
                    let got = index
                        .text_top(
                            &snap,
                            &parsed,
                            &*full,
                            hit_filter.as_ref(),
                            n,
                            &opts,
                            &spare,
                        )
                        .unwrap();
                    assert_same_top(&got, &want, &format!("{q:?} n={n}"));
                    compared += want.len();
                }
            }
        }
        assert!(compared > 300, "the queries match documents ({compared})");
    }

    #[test]
    fn common_words_scored_on_the_best_by_the_others_rank_almost_like_every_word_scored() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path(), OpenOptions::default()).unwrap();
        corpus_in(&index, 3);
        let snap = index.snapshot().unwrap();
        let opts = SearchOptions::default();
        // w0-w3 are in more than 80% of the documents, w30 and above in under 20%.
        let mixed = [
            "w0 w20 w30",
            "w1 w3 w12 w38",
            "w2 w0 w39 w5",
            "w3 w30 w31 w1 w0",
        ];
        let (mut compared, mut same, mut with_common) = (0, 0, 0);
        for q in QUERIES.iter().chain(&mixed) {
            let mut parsed = ParsedQuery::parse(q, &mut tokenizer::analyzer());
            let full = parsed
                .to_query(&index.fields, opts.title_boost, opts.proximity_boost)
                .unwrap();
            parsed.leave_out_common(&snap.searcher, &index.fields, 0.8);
            assert!(parsed.common.len() < parsed.words.len(), "{q:?}");
            with_common += usize::from(!parsed.common.is_empty());
            for n in [3, 10, 30] {
                let want = snap
                    .searcher
                    .search(&*full, &TopDocs::with_limit(n).order_by_score())
                    .unwrap();
                let got = index
                    .text_top(&snap, &parsed, &*full, None, n, &opts, &SpareCore::none())
                    .unwrap();
                assert_eq!(got.len(), want.len(), "{q:?} n={n}");
                // Every document returned carries its exact full score.
                for (score, addr) in &got {
                    let exact = full
                        .explain(&snap.searcher, *addr)
                        .map(|e| e.value())
                        .unwrap();
                    assert!(
                        (score - exact).abs() < 1e-4,
                        "{q:?} n={n}: {score} vs {exact}"
                    );
                }
                let wanted: FxHashSet<DocAddress> = want.iter().map(|h| h.1).collect();
                compared += want.len();
                same += got.iter().filter(|h| wanted.contains(&h.1)).count();
            }
        }
        assert!(
            with_common >= 5,
            "the corpus has common words ({with_common})"
        );
        // These common words weigh more than English's "the" does (idf 0.07-0.19 here
        // against 1.6 and up for the others), yet 442 of the 473 top documents (ties at
        // the cut included) are the same.
        assert!(same * 100 >= compared * 90, "{same} of {compared}");
        // Fewer documents than wanted hold the other words: every word is scored, so the
        // documents holding only common words are there.
        let mut parsed = ParsedQuery::parse("w0 w1 nowhere", &mut tokenizer::analyzer());
        let full = parsed
            .to_query(&index.fields, opts.title_boost, opts.proximity_boost)
            .unwrap();
        parsed.leave_out_common(&snap.searcher, &index.fields, 0.8);
        assert_eq!(parsed.common, ["w0", "w1"]);
        let want = snap
            .searcher
            .search(&*full, &TopDocs::with_limit(10).order_by_score())
            .unwrap();
        let got = index
            .text_top(&snap, &parsed, &*full, None, 10, &opts, &SpareCore::none())
            .unwrap();
        assert_same_top(&got, &want, "w0 w1 nowhere");
        // A query made only of common words keeps them all.
        let mut only_common = ParsedQuery::parse("w0 w1", &mut tokenizer::analyzer());
        only_common.leave_out_common(&snap.searcher, &index.fields, 0.8);
        assert!(only_common.common.is_empty());
    }

    #[test]
    fn each_segment_is_asked_for_twice_its_share_of_the_nearest() {
        assert_eq!(segment_ask(308, 25_000, 100_000), 174); // 154 + 20
        assert_eq!(segment_ask(308, 100_000, 100_000), 308); // never more than asked
        assert_eq!(segment_ask(308, 60_000, 100_000), 308);
        assert_eq!(segment_ask(53, 10, 100_000), 21); // a fresh small segment
        assert_eq!(segment_ask(53, 0, 0), 53);
    }

    #[test]
    fn leading_text_cuts_at_a_word_boundary() {
        assert_eq!(leading_text("hello wonderful world", 12), "hello…");
        assert_eq!(leading_text("short", 12), "short");
    }
}
