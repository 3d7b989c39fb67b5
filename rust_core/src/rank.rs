//! Ranking: fuse the BM25 and vector candidate lists, weigh by recency and visits, and
//! fold passages into one hit per page.
//!
//! Defaults come from the known-item evaluation in `bench/` (see its README). Naive
//! reciprocal-rank fusion of BM25 with MiniLM lost to BM25 alone on lexical queries
//! there, because it throws away how far apart the scores are; the default here is a
//! convex combination of min-max normalised scores, with the vector similarity computed
//! exactly for every BM25 candidate so no document is penalised for missing one list.

use std::collections::HashMap;

/// How the two candidate lists are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// `w * bm25_norm + (1 - w) * vector_norm`, both min-max normalised per query.
    Convex,
    /// `w / (k + bm25_rank) + (1 - w) / (k + vector_rank)`.
    Rrf,
    /// `w * z(bm25) + (1 - w) * clip(z(similarity))`, z-scores over the candidate pool
    /// (the similarity's clipped to `±vector_z_clip`), rescaled to [0, 1] so recency and
    /// visit multipliers keep their meaning.
    Zscore,
}

/// Weights of the ranking; every one is a parameter with a tested default.
///
/// The BM25 weight adapts to the query: `coverage` is the largest share of the query's
/// words that one of the top BM25 documents holds (`SearchOptions::coverage_depth` of
/// them), each word weighted by its inverse document frequency so that common words count
/// for little (`ParsedQuery::word_weights`). A query whose words all appear there (a
/// remembered phrase, a sentence from the page) is a lexical match to trust; one whose
/// words mostly do not (a paraphrase, a vague description) leans on meaning. With
/// `coverage_weighting` the weight is `bm25_weight + (1 - bm25_weight) * coverage`.
#[derive(Debug, Clone, PartialEq)]
pub struct RankOptions {
    /// Fusion method.
    pub fusion: Fusion,
    /// Weight of BM25 in the fusion (the vector signal gets the rest); with
    /// `coverage_weighting`, the weight when the best BM25 match holds none of the words.
    pub bm25_weight: f32,
    /// Raise the BM25 weight towards 1 as the best BM25 match covers more of the query.
    pub coverage_weighting: bool,
    /// RRF's rank offset.
    pub rrf_k: f32,
    /// With [`Fusion::Zscore`], how many standard deviations the similarity may move a
    /// document (0: unclipped). Clipping lets vectors reorder near-ties and rescue queries
    /// BM25 barely matches without overturning a strong lexical match.
    pub vector_z_clip: f32,
    /// Age (days since last seen) at which recency halves the boost; 0 disables decay.
    pub decay_half_life_days: f32,
    /// Lowest multiplier age can bring a score to.
    pub decay_floor: f32,
    /// Visit boost slope: `1 + visit_weight * ln(1 + visits)`.
    pub visit_weight: f32,
    /// Near-duplicates share their relevance: a candidate whose vector has at least this
    /// cosine similarity to a more relevant candidate's takes that one's fusion score, so
    /// among copies of the same text (mirrors, versions, re-posts) recency and visits
    /// decide which ranks first. 0 turns it off. `bench/README.md` has the similarities
    /// measured between copies and between distinct passages.
    pub duplicate_similarity: f32,
}

impl Default for RankOptions {
    fn default() -> Self {
        RankOptions {
            fusion: Fusion::Zscore,
            bm25_weight: 0.1,
            coverage_weighting: true,
            rrf_k: 60.0,
            vector_z_clip: 0.0,
            decay_half_life_days: 0.0,
            decay_floor: 0.5,
            visit_weight: 0.0,
            duplicate_similarity: 0.0,
        }
    }
}

/// How many of the most relevant candidates are compared for near-duplicates.
pub const DUPLICATE_DEPTH: usize = 50;

/// One document in the candidate pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Document id.
    pub id: u64,
    /// Grouping key.
    pub parent: u64,
    /// Last seen, unix seconds.
    pub last_seen: i64,
    /// Visit count.
    pub visits: u64,
    /// 1-based rank and score in the BM25 list.
    pub bm25: Option<(usize, f32)>,
    /// 1-based rank in the vector list (None if its similarity was computed afterwards).
    pub vector_rank: Option<usize>,
    /// Cosine similarity to the query vector.
    pub similarity: Option<f32>,
    /// Share of the query's words the best BM25 document holds (the same for every
    /// candidate of one search).
    pub coverage: f32,
    /// BM25 weight used in the fusion (the same for every candidate of one search).
    pub bm25_weight: f32,
    /// Fused relevance.
    pub fusion: f32,
    /// The more relevant near-duplicate whose fusion score this candidate shares (see
    /// [`RankOptions::duplicate_similarity`]).
    pub duplicate_of: Option<u64>,
    /// Recency multiplier.
    pub decay: f32,
    /// Visit multiplier.
    pub visit_boost: f32,
    /// Final score.
    pub score: f32,
}

impl Candidate {
    /// A candidate with no signals yet.
    pub fn new(id: u64, parent: u64, last_seen: i64, visits: u64) -> Candidate {
        Candidate {
            id,
            parent,
            last_seen,
            visits,
            bm25: None,
            vector_rank: None,
            similarity: None,
            coverage: 0.0,
            bm25_weight: 0.0,
            fusion: 0.0,
            duplicate_of: None,
            decay: 1.0,
            visit_boost: 1.0,
            score: 0.0,
        }
    }
}

/// Recency multiplier for something last seen `age_seconds` ago.
pub fn decay(age_seconds: i64, opts: &RankOptions) -> f32 {
    if opts.decay_half_life_days <= 0.0 {
        return 1.0;
    }
    let days = age_seconds.max(0) as f32 / 86_400.0;
    let floor = opts.decay_floor.clamp(0.0, 1.0);
    floor + (1.0 - floor) * 0.5f32.powf(days / opts.decay_half_life_days)
}

/// Popularity multiplier for `visits` visits.
pub fn visit_boost(visits: u64, opts: &RankOptions) -> f32 {
    1.0 + opts.visit_weight.max(0.0) * (1.0 + visits as f32).ln()
}

/// Computes fusion, decay, boost and final score of every candidate, then sorts best first
/// (ties broken by id, so results are deterministic).
/// `coverage` is the share of the query's words found in the best BM25 document (see
/// [`RankOptions`]); it only matters with `coverage_weighting`.
pub fn score(cands: &mut [Candidate], opts: &RankOptions, now: i64, coverage: f32) {
    fuse(cands, opts, coverage);
    finish(cands, opts, now);
}

/// The first half of [`score`]: the fused relevance of every candidate.
pub fn fuse(cands: &mut [Candidate], opts: &RankOptions, coverage: f32) {
    let max_bm25 = cands
        .iter()
        .filter_map(|c| c.bm25.map(|b| b.1))
        .fold(0f32, f32::max);
    let sims = cands.iter().filter_map(|c| c.similarity);
    let (lo, hi) = sims.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), s| {
        (lo.min(s), hi.max(s))
    });
    let has_bm25 = max_bm25 > 0.0;
    let has_vec = hi.is_finite();
    let base = opts.bm25_weight.clamp(0.0, 1.0);
    let w = match (has_bm25, has_vec) {
        (true, true) if opts.coverage_weighting => base + (1.0 - base) * coverage.clamp(0.0, 1.0),
        (true, true) => base,
        (true, false) => 1.0,
        (false, _) => 0.0,
    };
    let zs = (opts.fusion == Fusion::Zscore).then(|| zscores(cands, lo, opts.vector_z_clip));
    for (i, c) in cands.iter_mut().enumerate() {
        c.coverage = coverage;
        c.bm25_weight = w;
        c.fusion = match opts.fusion {
            Fusion::Zscore => {
                let (zb, zv) = zs.as_ref().map_or((0.0, 0.0), |z| z[i]);
                w * zb + (1.0 - w) * zv
            }
            Fusion::Convex => {
                let b = c
                    .bm25
                    .map_or(0.0, |(_, s)| if has_bm25 { s / max_bm25 } else { 0.0 });
                let v = c
                    .similarity
                    .map_or(0.0, |s| if hi > lo { (s - lo) / (hi - lo) } else { 1.0 });
                w * b + (1.0 - w) * v
            }
            Fusion::Rrf => {
                let b = c.bm25.map_or(0.0, |(r, _)| 1.0 / (opts.rrf_k + r as f32));
                let v = c.vector_rank.map_or(0.0, |r| 1.0 / (opts.rrf_k + r as f32));
                w * b + (1.0 - w) * v
            }
        };
    }
    if opts.fusion == Fusion::Zscore {
        rescale_fusion(cands);
    }
}

/// The candidates [`share_duplicates`] compares: the `DUPLICATE_DEPTH` most relevant
/// (indices into `cands`, most relevant first).
pub fn duplicate_candidates(cands: &[Candidate]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&a, &b| {
        cands[b]
            .fusion
            .total_cmp(&cands[a].fusion)
            .then(cands[a].id.cmp(&cands[b].id))
    });
    order.truncate(DUPLICATE_DEPTH);
    order
}

/// Near-duplicates share relevance: walking `vectors` (candidate index and its vector,
/// most relevant first), each candidate whose cosine similarity to an earlier leader is at
/// least `threshold` takes that leader's fusion score; the others become leaders.
pub fn share_duplicates(cands: &mut [Candidate], vectors: &[(usize, Vec<f32>)], threshold: f32) {
    if threshold <= 0.0 {
        return;
    }
    let mut leaders: Vec<(usize, &[f32])> = Vec::new();
    for (i, v) in vectors {
        let lead = leaders
            .iter()
            .find(|(_, lv)| crate::vectors::cosine(lv, v) >= threshold);
        match lead {
            Some(&(l, _)) => {
                let (id, fusion) = (cands[l].id, cands[l].fusion);
                let c = &mut cands[*i];
                if fusion > c.fusion {
                    c.fusion = fusion;
                    c.duplicate_of = Some(id);
                }
            }
            None => leaders.push((*i, v)),
        }
    }
}

/// The second half of [`score`]: recency, visits and the final order.
pub fn finish(cands: &mut [Candidate], opts: &RankOptions, now: i64) {
    for c in cands.iter_mut() {
        c.decay = decay(now - c.last_seen, opts);
        c.visit_boost = visit_boost(c.visits, opts);
        c.score = c.fusion * c.decay * c.visit_boost;
    }
    cands.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
}

/// Per-candidate z-scores of BM25 (0 when absent) and similarity (`lowest` when absent;
/// clipped to `±clip` when `clip > 0`).
fn zscores(cands: &[Candidate], lowest: f32, clip: f32) -> Vec<(f32, f32)> {
    let b: Vec<f32> = cands.iter().map(|c| c.bm25.map_or(0.0, |x| x.1)).collect();
    let lowest = if lowest.is_finite() { lowest } else { 0.0 };
    let v: Vec<f32> = cands
        .iter()
        .map(|c| c.similarity.unwrap_or(lowest))
        .collect();
    let (zb, mut zv) = (standardise(&b), standardise(&v));
    if clip > 0.0 {
        zv.iter_mut().for_each(|z| *z = z.clamp(-clip, clip));
    }
    zb.into_iter().zip(zv).collect()
}

fn standardise(x: &[f32]) -> Vec<f32> {
    let n = x.len().max(1) as f32;
    let mean = x.iter().sum::<f32>() / n;
    let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n).sqrt();
    if sd <= f32::EPSILON {
        return vec![0.0; x.len()];
    }
    x.iter().map(|v| (v - mean) / sd).collect()
}

/// Maps fusion scores linearly onto [0, 1] (the best candidate gets 1).
fn rescale_fusion(cands: &mut [Candidate]) {
    let (lo, hi) = cands
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(c.fusion), hi.max(c.fusion))
        });
    for c in cands.iter_mut() {
        c.fusion = if hi > lo {
            (c.fusion - lo) / (hi - lo)
        } else {
            1.0
        };
    }
}

/// Picks the best `k` hits from candidates sorted best first: with `group`, one hit per
/// parent holding up to `per_hit` of its passages (indices into `cands`), best first.
pub fn group(cands: &[Candidate], k: usize, group: bool, per_hit: usize) -> Vec<Vec<usize>> {
    let mut hits: Vec<Vec<usize>> = Vec::new();
    let mut by_parent: HashMap<u64, usize> = HashMap::new();
    for (i, c) in cands.iter().enumerate() {
        if !group {
            if hits.len() == k {
                break;
            }
            hits.push(vec![i]);
            continue;
        }
        match by_parent.get(&c.parent) {
            Some(&h) if hits[h].len() < per_hit.max(1) => hits[h].push(i),
            Some(_) => {}
            None if hits.len() < k => {
                by_parent.insert(c.parent, hits.len());
                hits.push(vec![i]);
            }
            None => {}
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: u64, parent: u64, bm25: Option<f32>, sim: Option<f32>) -> Candidate {
        let mut c = Candidate::new(id, parent, 0, 0);
        c.bm25 = bm25.map(|s| (id as usize, s));
        c.similarity = sim;
        c
    }

    #[test]
    fn decay_halves_towards_the_floor_and_never_goes_below_it() {
        let o = RankOptions {
            decay_half_life_days: 10.0,
            decay_floor: 0.5,
            ..RankOptions::default()
        };
        assert_eq!(decay(0, &o), 1.0);
        assert!((decay(10 * 86_400, &o) - 0.75).abs() < 1e-6);
        assert!(decay(10_000 * 86_400, &o) >= 0.5);
        assert_eq!(decay(1_000, &RankOptions::default()), 1.0);
    }

    #[test]
    fn visit_boost_grows_logarithmically() {
        let o = RankOptions {
            visit_weight: 0.2,
            ..RankOptions::default()
        };
        assert_eq!(visit_boost(0, &o), 1.0);
        assert!(visit_boost(100, &o) > visit_boost(10, &o));
        assert!((visit_boost(100, &o) - (1.0 + 0.2 * 101f32.ln())).abs() < 1e-6);
    }

    #[test]
    fn convex_fusion_rewards_documents_strong_in_both_lists() {
        let mut c = vec![
            cand(1, 1, Some(10.0), Some(0.3)),
            cand(2, 2, Some(8.0), Some(0.8)),
            cand(3, 3, None, Some(0.9)),
            cand(4, 4, Some(1.0), Some(0.1)),
        ];
        let convex = RankOptions {
            fusion: Fusion::Convex,
            bm25_weight: 0.5,
            coverage_weighting: false,
            ..RankOptions::default()
        };
        score(&mut c, &convex, 0, 0.0);
        assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [2, 1, 3, 4]);
        assert!((c[0].fusion - (0.5 * 0.8 + 0.5 * 0.875)).abs() < 1e-6);
    }

    #[test]
    fn zscore_fusion_is_scaled_to_unit_range_and_rewards_both_signals() {
        let mut c = vec![
            cand(1, 1, Some(10.0), Some(0.3)),
            cand(2, 2, Some(9.0), Some(0.8)),
            cand(3, 3, None, Some(0.5)),
            cand(4, 4, Some(1.0), Some(0.1)),
        ];
        let o = RankOptions {
            fusion: Fusion::Zscore,
            bm25_weight: 0.5,
            coverage_weighting: false,
            vector_z_clip: 0.0,
            ..RankOptions::default()
        };
        score(&mut c, &o, 0, 0.0);
        assert_eq!(c[0].id, 2);
        assert_eq!(c[0].fusion, 1.0);
        assert_eq!(c.last().unwrap().fusion, 0.0);
    }

    #[test]
    fn clipped_vector_scores_cannot_overturn_a_strong_lexical_lead() {
        // Doc 1 leads BM25 by far; doc 2 is far closer in meaning.
        let pool = || {
            let mut c = vec![
                cand(1, 1, Some(30.0), Some(0.1)),
                cand(2, 2, Some(5.0), Some(0.9)),
            ];
            c.extend((3..13).map(|i| cand(i, i, Some(4.0), Some(0.2))));
            c
        };
        let fixed = |clip| RankOptions {
            vector_z_clip: clip,
            bm25_weight: 0.5,
            coverage_weighting: false,
            ..RankOptions::default()
        };
        let mut clipped = pool();
        score(&mut clipped, &fixed(1.0), 0, 0.0);
        assert_eq!(clipped[0].id, 1);
        let mut unclipped = pool();
        score(&mut unclipped, &fixed(0.0), 0, 0.0);
        assert_eq!(unclipped[0].id, 2);
    }

    #[test]
    fn full_coverage_of_the_query_by_the_best_bm25_match_means_bm25_order() {
        let pool = || {
            vec![
                cand(1, 1, Some(10.0), Some(0.1)),
                cand(2, 2, Some(9.0), Some(0.9)),
                cand(3, 3, Some(1.0), Some(0.5)),
            ]
        };
        let mut covered = pool();
        score(&mut covered, &RankOptions::default(), 0, 1.0);
        assert_eq!(covered.iter().map(|c| c.id).collect::<Vec<_>>(), [1, 2, 3]);
        let mut loose = pool();
        score(&mut loose, &RankOptions::default(), 0, 0.0);
        assert_eq!(loose[0].id, 2, "with no coverage the meaning decides");
    }

    #[test]
    fn bm25_only_pools_rank_by_bm25() {
        let mut c = vec![cand(1, 1, Some(1.0), None), cand(2, 2, Some(3.0), None)];
        score(&mut c, &RankOptions::default(), 0, 0.0);
        assert_eq!(c[0].id, 2);
        assert_eq!(c[0].fusion, 1.0);
    }

    #[test]
    fn near_duplicates_share_relevance_so_the_familiar_copy_ranks_first() {
        // Documents 1 and 2 are copies of one text (2 lost a query word); 3 is another
        // text. Document 2 was visited often and recently, 1 once long ago.
        let pool = || {
            let mut c = vec![
                cand(1, 1, Some(10.0), Some(0.80)),
                cand(2, 2, Some(6.0), Some(0.78)),
                cand(3, 3, Some(8.0), Some(0.70)),
                cand(4, 4, Some(1.0), Some(0.20)),
            ];
            c[0].last_seen = -200 * 86_400;
            c[0].visits = 1;
            c[1].last_seen = -86_400;
            c[1].visits = 6;
            c[2].last_seen = -86_400;
            c[2].visits = 6;
            c
        };
        let opts = RankOptions {
            decay_half_life_days: 30.0,
            decay_floor: 0.3,
            visit_weight: 0.15,
            duplicate_similarity: 0.92,
            ..RankOptions::default()
        };
        let text = |t: f32| {
            let mut v = vec![0.0f32; 8];
            v[0] = 1.0;
            v[1] = t;
            v
        };
        let vectors = |c: &[Candidate]| -> Vec<(usize, Vec<f32>)> {
            duplicate_candidates(c)
                .into_iter()
                .map(|i| {
                    let v = match c[i].id {
                        1 => text(0.0),
                        2 => text(0.05),
                        3 => text(3.0),
                        _ => text(-3.0),
                    };
                    (i, v)
                })
                .collect()
        };

        let mut plain = pool();
        score(&mut plain, &opts, 0, 0.5);
        let order = |c: &[Candidate]| c.iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(
            order(&plain)[0],
            3,
            "without sharing the lost word costs copy 2 its rank"
        );

        let mut shared = pool();
        fuse(&mut shared, &opts, 0.5);
        let v = vectors(&shared);
        share_duplicates(&mut shared, &v, opts.duplicate_similarity);
        finish(&mut shared, &opts, 0);
        assert_eq!(order(&shared)[0], 2);
        assert_eq!(shared[0].duplicate_of, Some(1));
        let lead = shared.iter().find(|c| c.id == 1).unwrap();
        assert_eq!((lead.duplicate_of, lead.fusion), (None, shared[0].fusion));
        let other = shared.iter().find(|c| c.id == 3).unwrap();
        assert_eq!(
            other.duplicate_of, None,
            "a different text keeps its own relevance"
        );

        let mut off = pool();
        fuse(&mut off, &opts, 0.5);
        let v = vectors(&off);
        share_duplicates(&mut off, &v, 0.0);
        assert!(off.iter().all(|c| c.duplicate_of.is_none()));
    }

    #[test]
    fn grouping_keeps_one_hit_per_parent_with_its_passages() {
        let c = vec![
            cand(1, 10, None, None),
            cand(2, 20, None, None),
            cand(3, 10, None, None),
            cand(4, 30, None, None),
        ];
        assert_eq!(group(&c, 2, true, 3), vec![vec![0, 2], vec![1]]);
        assert_eq!(group(&c, 2, false, 3), vec![vec![0], vec![1]]);
    }
}
