//! The two candidate lists a search fuses: the best documents by BM25 (tantivy's own
//! top-k collector, with block-max WAND) and the nearest vectors of every segment's graph,
//! each checked against the document's current vector stamp.

use rust_stemmers::Algorithm;
use rustc_hash::{FxHashMap, FxHashSet};
use tantivy::collector::TopDocs;
use tantivy::query::{EnableScoring, Query, Scorer};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, DocSet, Score, Searcher};

use super::cache::SegmentCache;
use super::filter::HitFilter;
use super::search::SearchOptions;
use super::{Index, Snapshot};
use crate::error::Result;
use crate::text::query::{filtered, ParsedQuery};
use crate::text::tokenizer;
use crate::vectors::{self, cosine, Found};
use crate::DIM;

impl Index {
    /// Share of the query's words that occur (in any of their forms) in the title or body
    /// of the document at `addr`, analysed in the document's language, each word counting
    /// its weight in `weights` (same order as the words).
    pub(super) fn coverage(
        &self,
        snap: &Snapshot,
        addr: DocAddress,
        parsed: &ParsedQuery,
        weights: &[f32],
        analyzer: &mut TextAnalyzer,
    ) -> Result<f32> {
        let total: f32 = weights.iter().sum();
        if parsed.words.is_empty() || total <= 0.0 {
            return Ok(0.0);
        }
        let doc = self.stored(snap, addr)?.doc;
        let latin = tokenizer::latin_stemmer(&doc.language);
        let mut own;
        let analyzer = if latin == Algorithm::English {
            analyzer
        } else {
            own = tokenizer::analyzer_for(latin);
            &mut own
        };
        let mut found = FxHashSet::default();
        for text in [&doc.title, &doc.section, &doc.body] {
            let mut stream = analyzer.token_stream(text);
            while let Some(t) = tantivy::tokenizer::TokenStream::next(&mut stream) {
                found.insert(t.text.clone());
            }
        }
        let held: f32 = (0..parsed.words.len())
            .zip(weights)
            .filter(|&(i, _)| parsed.forms(i).any(|w| found.contains(w.as_str())))
            .map(|(_, weight)| weight)
            .sum();
        Ok(held / total)
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
    /// lists, which are then [`COMMON_RESCORE_DEPTH`] times as long, and their scores are
    /// added to the documents in the lists. That is not exact: a document outside the lists
    /// that only the common words would lift into the top is missed. When fewer documents
    /// than that hold the other words, every word is scored.
    ///
    /// Filters are checked on the hits, as most keep most documents (a default search
    /// leaves out only facts); only when too few survive is the filtered query run whole.
    pub(super) fn text_top(
        &self,
        snap: &Snapshot,
        parsed: &ParsedQuery,
        full: &dyn Query,
        filter: Option<&HitFilter>,
        n: usize,
        opts: &SearchOptions,
    ) -> Result<Vec<(Score, DocAddress)>> {
        let searcher = &snap.searcher;
        let whole = || {
            let q = filtered(full.box_clone(), filter.map(|f| f.query.box_clone()));
            top(searcher, &*q, n)
        };
        let words = match parsed.words_query(&self.fields, opts.boosts()) {
            Some(words) if parsed.phrases.is_empty() => words,
            _ => return whole(),
        };
        let ask = if filter.is_some() { with_spares(n) } else { n };
        let common = parsed.common_clauses(&self.fields, opts.boosts());
        let pool = if common.is_empty() {
            ask
        } else {
            ask * COMMON_RESCORE_DEPTH
        };
        let by_words = top(searcher, &*words, pool)?;
        let complete = by_words.len() < pool;
        if complete && !common.is_empty() {
            // Too few documents hold the other words to leave the common ones out.
            let every = ParsedQuery {
                common: Vec::new(),
                ..parsed.clone()
            };
            return self.text_top(snap, &every, full, filter, n, opts);
        }
        let mut best: FxHashMap<DocAddress, Score> =
            by_words.into_iter().map(|(s, a)| (a, s)).collect();
        if let Some(near) = parsed.near_query(&self.fields, opts.boosts(), opts.proximity_boost) {
            for (s, a) in top(searcher, &*near, pool)? {
                let e = best.entry(a).or_insert(s);
                *e = e.max(s);
            }
        }
        let mut merged: Vec<(Score, DocAddress)> = best.into_iter().map(|(a, s)| (s, a)).collect();
        // One clause at a time: a term's scorer seeks through its skip list, where their
        // union would decode every posting of these longest lists near each document.
        for clause in &common {
            add_scores(searcher, &**clause, &mut merged)?;
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
    pub(super) fn vector_candidates(
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
        // document) and searched within.
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
}

/// With common words left out, how many times the wanted BM25 candidates are ranked by
/// the other words before the common words' scores are added.
const COMMON_RESCORE_DEPTH: usize = 2;

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

/// The best `n` documents for `query`, best first.
fn top(searcher: &Searcher, query: &dyn Query, n: usize) -> Result<Vec<(Score, DocAddress)>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    Ok(searcher.search(query, &TopDocs::with_limit(n).order_by_score())?)
}

/// Below this many allowed documents, a filtered vector search scores them exactly.
const EXACT_SCAN_LIMIT: usize = 2_000;

/// `n` plus room for hits that a filter or a stamp check will drop.
fn with_spares(n: usize) -> usize {
    n + n / 2 + 8
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

#[cfg(test)]
mod tests {
    use super::*;

    use tantivy::collector::TopDocs;

    use crate::doc::{Document, Kind};
    use crate::index::{Op, OpenOptions};
    use crate::text::query::Filters;
    use crate::text::tokenizer;

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
                .to_query(&index.fields, opts.boosts(), opts.proximity_boost)
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
                    let got = index
                        .text_top(&snap, &parsed, &*full, hit_filter.as_ref(), n, &opts)
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
                .to_query(&index.fields, opts.boosts(), opts.proximity_boost)
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
                    .text_top(&snap, &parsed, &*full, None, n, &opts)
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
        // These common words weigh more than English's "the" does, yet nine in ten of the
        // top documents (ties at the cut included) are the same.
        assert!(same * 100 >= compared * 90, "{same} of {compared}");
        // Fewer documents than wanted hold the other words: every word is scored, so the
        // documents holding only common words are there.
        let mut parsed = ParsedQuery::parse("w0 w1 nowhere", &mut tokenizer::analyzer());
        let full = parsed
            .to_query(&index.fields, opts.boosts(), opts.proximity_boost)
            .unwrap();
        parsed.leave_out_common(&snap.searcher, &index.fields, 0.8);
        assert_eq!(parsed.common, ["w0", "w1"]);
        let want = snap
            .searcher
            .search(&*full, &TopDocs::with_limit(10).order_by_score())
            .unwrap();
        let got = index
            .text_top(&snap, &parsed, &*full, None, 10, &opts)
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
}
