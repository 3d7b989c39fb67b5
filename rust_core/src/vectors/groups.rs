//! Near-duplicate groups: a segment's graph links one representative per group of
//! near-identical vectors, and the other members are scored exactly beside it.
//!
//! Browsing history holds many near-copies of one text: the same article under several
//! URLs, a page revisited after a small edit, docs of two versions. In an HNSW graph each
//! such copy spends its links on the other copies, so the graph splits into tight balls
//! that a search cannot leave, and recall falls as the copies grow in number (measured at
//! 1M passages of 63 near-copies each: 0.90 at expansion 1024, 0.94 at 2048).
//!
//! So while a segment is built, a vector whose nearest representative is at least
//! [`GROUP_SIMILARITY`] alike joins that representative's group instead of the graph. A
//! search walks the graph of representatives, then scores every member of the groups it
//! found, with the same quantization and metric as the graph. Data without near-copies
//! makes one group per vector: the graph is what it would have been.
//!
//! The groups are stored in the segment's key file after its `(key, stamp)` table:
//!
//! ```text
//! u64 groups   u32 encoding (bytes per scalar: 1 = i8, 4 = f32)   u32 dimensions
//! u32 offsets[groups + 1]    group g's members are members[offsets[g]..offsets[g + 1]]
//! u32 members[count]         indices into the key table, each group's representative first
//! u32 slots[count]           per key-table entry: REP | group, or its vector's slot
//! vectors[count - groups]    the members that are not representatives, in member order
//! ```
//!
//! The member at position `p` of group `g` (not its representative) has vector slot
//! `p - g - 1`: each group before it, and its own, put one representative before it.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use usearch::Index as HnswIndex;

use crate::error::Result;
use crate::manifest::Quantization;

use super::segment::Entry;

/// Least cosine similarity (in the graph's quantization) at which a vector joins the
/// group of its nearest representative. MiniLM gives near-copies of a passage (a few
/// words swapped or dropped) 0.94-0.99; different passages of one page rarely pass 0.9.
pub const GROUP_SIMILARITY: f32 = 0.95;

/// Marks a slot that names a representative's group (its vector is in the graph).
const REP: u32 = 1 << 31;

/// Bytes of the groups header.
const HEADER: usize = 16;

/// How members' vectors are stored: as the graph's i8 or as f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// usearch's i8: scaled to unit length, times 127, truncated.
    I8,
    /// Plain f32 (for f16 and f32 indexes).
    F32,
}

impl Encoding {
    /// The encoding of an index quantized as `q`.
    pub fn for_quantization(q: Quantization) -> Encoding {
        match q {
            Quantization::I8 => Encoding::I8,
            Quantization::F16 | Quantization::F32 => Encoding::F32,
        }
    }

    fn scalar_bytes(self) -> usize {
        match self {
            Encoding::I8 => 1,
            Encoding::F32 => 4,
        }
    }

    fn from_code(code: u32) -> Option<Encoding> {
        match code {
            1 => Some(Encoding::I8),
            4 => Some(Encoding::F32),
            _ => None,
        }
    }

    /// Appends `v` in this encoding.
    fn encode(self, v: &[f32], out: &mut Vec<u8>) {
        match self {
            Encoding::I8 => out.extend(to_i8(v).iter().map(|&x| x as u8)),
            Encoding::F32 => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        }
    }
}

/// `v` as usearch casts it to i8: scaled to unit length, times 127, clamped, truncated.
fn to_i8(v: &[f32]) -> Vec<i8> {
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    // `norm > 0` fails for NaN too, which usearch also maps to zeros.
    if norm.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return vec![0; v.len()];
    }
    v.iter()
        .map(|&x| (f64::from(x) * 127.0 / norm).clamp(-127.0, 127.0) as i8)
        .collect()
}

/// A query prepared for scoring members of one encoding.
pub enum Probe {
    /// The i8 query and its squared norm.
    I8(Vec<i8>, i32),
    /// The f32 query and its norm.
    F32(Vec<f32>, f32),
}

impl Probe {
    /// Prepares `query` for members stored as `encoding`.
    pub fn new(encoding: Encoding, query: &[f32]) -> Probe {
        match encoding {
            Encoding::I8 => {
                let q = to_i8(query);
                let n2 = q.iter().map(|&x| i32::from(x) * i32::from(x)).sum();
                Probe::I8(q, n2)
            }
            Encoding::F32 => {
                let n = query.iter().map(|x| x * x).sum::<f32>().sqrt();
                Probe::F32(query.to_vec(), n)
            }
        }
    }

    /// Cosine similarity with a stored member vector (usearch's i8 cosine for i8).
    pub fn similarity(&self, stored: &[u8]) -> f32 {
        match self {
            Probe::I8(q, q2) => {
                let (ab, b2) = dot_i8(q, stored);
                if *q2 == 0 || b2 == 0 {
                    return 0.0;
                }
                ab as f32 / ((*q2 as f32).sqrt() * (b2 as f32).sqrt())
            }
            Probe::F32(q, qn) => {
                let (mut ab, mut b2) = (0f32, 0f32);
                for (a, b) in q.iter().zip(stored.chunks_exact(4)) {
                    let b = f32::from_le_bytes(b.try_into().expect("4 bytes"));
                    ab += a * b;
                    b2 += b * b;
                }
                if *qn == 0.0 || b2 == 0.0 {
                    return 0.0;
                }
                ab / (qn * b2.sqrt())
            }
        }
    }
}

/// `(a·b, b·b)` of an i8 query and an i8 vector stored as bytes.
fn dot_i8(a: &[i8], b: &[u8]) -> (i32, i32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { dot_i8_avx2(a, b) };
    }
    dot_i8_portable(a, b)
}

/// [`dot_i8_portable`] with AVX2 (the wheel's baseline is SSE2): sixteen bytes at a
/// time widened to i16 and multiplied pairwise into i32 (`vpmaddwd`), where the compiler
/// widened them to i32 and used the slow 32-bit multiply (a search scores ~1,000 group
/// members).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[i8], b: &[u8]) -> (i32, i32) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_castsi256_si128, _mm256_cvtepi8_epi16,
        _mm256_extracti128_si256, _mm256_madd_epi16, _mm256_setzero_si256, _mm_add_epi32,
        _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32,
    };
    // SAFETY (whole body): AVX2 is enabled by the caller's check; every load reads 16
    // bytes starting at `i`, and `i + 16 <= n` where `n` is within both slices.
    #[target_feature(enable = "avx2")]
    unsafe fn sum(v: __m256i) -> i32 {
        let x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0b01_00_11_10));
        let x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0b10_11_00_01));
        _mm_cvtsi128_si32(x)
    }
    let n = a.len().min(b.len());
    let (mut ab, mut bb) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut i = 0;
    while i + 16 <= n {
        let x = _mm256_cvtepi8_epi16(_mm_loadu_si128(a.as_ptr().add(i).cast()));
        let y = _mm256_cvtepi8_epi16(_mm_loadu_si128(b.as_ptr().add(i).cast()));
        ab = _mm256_add_epi32(ab, _mm256_madd_epi16(x, y));
        bb = _mm256_add_epi32(bb, _mm256_madd_epi16(y, y));
        i += 16;
    }
    let (tail_ab, tail_bb) = dot_i8_portable(&a[i..n], &b[i..n]);
    (sum(ab) + tail_ab, sum(bb) + tail_bb)
}

#[inline(always)]
fn dot_i8_portable(a: &[i8], b: &[u8]) -> (i32, i32) {
    let (mut ab, mut b2) = (0i32, 0i32);
    for (&a, &b) in a.iter().zip(b) {
        let (a, b) = (i32::from(a as i16), i32::from(b as i8 as i16));
        ab += a * b;
        b2 += b * b;
    }
    (ab, b2)
}

/// Which group each entry joined, and whether it is the group's representative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// Group id (the representative's key in the graph).
    pub group: u32,
    /// True for the group's representative.
    pub rep: bool,
}

/// Entries grouped at a time: each batch is first searched against the graph, then its
/// new representatives are added, so no search runs while the graph changes. Entries the
/// graph has no group for are compared with the batch's new representatives one by one
/// (up to BATCH² / 2 comparisons).
const BATCH: usize = 128;

/// Groups `entries` (searching on `threads` threads), adding each new representative to
/// `hnsw` under its group id. Returns `None` soon after `cancel` is set.
///
/// An entry joins the group of the nearest representative the graph finds (or else of the
/// first new representative of its batch) whose cosine with it, in f32, is at least
/// [`GROUP_SIMILARITY`].
pub fn assign(
    hnsw: &HnswIndex,
    entries: &[Entry<'_>],
    threads: usize,
    cancel: &AtomicBool,
) -> Result<Option<Vec<Assignment>>> {
    let threads = threads.max(1);
    let mut out = Vec::with_capacity(entries.len());
    // The entry each group's representative is.
    let mut rep_of: Vec<usize> = Vec::new();
    for (b, batch) in entries.chunks(BATCH).enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let nearest = |e: &Entry<'_>| -> Result<Option<u32>> {
            if rep_of.is_empty() {
                return Ok(None);
            }
            let found = hnsw.search(e.vector, 1)?;
            Ok(found.keys.first().and_then(|&g| {
                let rep = entries[*rep_of.get(g as usize)?].vector;
                (super::cosine(e.vector, rep) >= GROUP_SIMILARITY).then_some(g as u32)
            }))
        };
        let part = batch.len().div_ceil(threads);
        let joined: Vec<Option<u32>> = std::thread::scope(|s| {
            let workers: Vec<_> = batch
                .chunks(part)
                .map(|p| s.spawn(move || p.iter().map(nearest).collect::<Result<Vec<_>>>()))
                .collect();
            workers.into_iter().try_fold(Vec::new(), |mut all, w| {
                all.extend(w.join().expect("vector grouping thread panicked")?);
                Ok::<_, crate::error::CoreError>(all)
            })
        })?;
        let mut new_reps: Vec<(u32, &[f32])> = Vec::new();
        for (i, j) in joined.into_iter().enumerate() {
            let v = batch[i].vector;
            let j = j.or_else(|| {
                let mut same = new_reps.iter();
                same.find(|(_, r)| super::cosine(v, r) >= GROUP_SIMILARITY)
                    .map(|&(g, _)| g)
            });
            out.push(match j {
                Some(group) => Assignment { group, rep: false },
                None => {
                    let group = rep_of.len() as u32;
                    rep_of.push(b * BATCH + i);
                    new_reps.push((group, batch[i].vector));
                    Assignment { group, rep: true }
                }
            });
        }
        // One at a time: usearch's concurrent inserts can leave a node no search reaches
        // (unum-cloud/USearch#735), and an unreachable representative hides its group.
        for (g, v) in new_reps {
            hnsw.add(u64::from(g), v)?;
        }
    }
    Ok(Some(out))
}

/// Writes the groups section for `entries` grouped as `assigned`; `order` lists entry
/// indices in key order (the key table's order).
pub fn write(
    w: &mut impl Write,
    entries: &[Entry<'_>],
    order: &[usize],
    assigned: &[Assignment],
    encoding: Encoding,
    dimensions: usize,
) -> std::io::Result<()> {
    let groups = assigned.iter().filter(|a| a.rep).count();
    let mut sizes = vec![0u32; groups + 1];
    for a in assigned {
        sizes[a.group as usize + 1] += 1;
    }
    let mut offsets = sizes;
    for g in 0..groups {
        offsets[g + 1] += offsets[g];
    }
    // Members in key order within each group, the representative first.
    let mut fill: Vec<u32> = offsets[..groups].iter().map(|o| o + 1).collect();
    let mut members = vec![0u32; entries.len()];
    let mut slots = vec![0u32; entries.len()];
    for (rank, &i) in order.iter().enumerate() {
        let a = assigned[i];
        let g = a.group as usize;
        let at = if a.rep {
            slots[rank] = REP | a.group;
            offsets[g]
        } else {
            let at = fill[g];
            fill[g] += 1;
            slots[rank] = at - a.group - 1;
            at
        };
        members[at as usize] = rank as u32;
    }
    w.write_all(&(groups as u64).to_le_bytes())?;
    w.write_all(&(encoding.scalar_bytes() as u32).to_le_bytes())?;
    w.write_all(&(dimensions as u32).to_le_bytes())?;
    for x in offsets.iter().chain(&members).chain(&slots) {
        w.write_all(&x.to_le_bytes())?;
    }
    let mut buf = Vec::with_capacity(dimensions * encoding.scalar_bytes());
    for (g, pair) in offsets.windows(2).enumerate() {
        for &rank in &members[pair[0] as usize + 1..pair[1] as usize] {
            debug_assert!(!assigned[order[rank as usize]].rep && g < groups);
            buf.clear();
            encoding.encode(entries[order[rank as usize]].vector, &mut buf);
            w.write_all(&buf)?;
        }
    }
    Ok(())
}

/// Where a key-table entry's vector is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// A representative: its vector is the graph's node of this group.
    Rep(u64),
    /// A member: its vector is stored at this slot.
    Stored(usize),
}

/// The groups section of a mapped key file (offsets into it; checked on every read).
#[derive(Debug, Clone, Copy)]
pub struct Groups {
    count: usize,
    groups: usize,
    encoding: Encoding,
    dimensions: usize,
    offsets_at: usize,
    members_at: usize,
    slots_at: usize,
    vectors_at: usize,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

impl Groups {
    /// Reads the header of the groups section at `at` of `bytes` (a key file of `count`
    /// entries), checking that the file has exactly the length it declares.
    pub fn parse(bytes: &[u8], at: usize, count: usize) -> std::result::Result<Groups, String> {
        let head = bytes
            .get(at..at + HEADER)
            .ok_or("the vector groups section is missing")?;
        let groups = u64::from_le_bytes(head[..8].try_into().expect("8 bytes")) as usize;
        let code = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        let encoding =
            Encoding::from_code(code).ok_or(format!("unknown vector encoding {code}"))?;
        let dimensions = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
        if groups > count || (count > 0 && groups == 0) {
            return Err(format!("{groups} groups for {count} vectors"));
        }
        let offsets_at = at + HEADER;
        let members_at = offsets_at + 4 * (groups + 1);
        let slots_at = members_at + 4 * count;
        let vectors_at = slots_at + 4 * count;
        let expected = vectors_at + (count - groups) * dimensions * encoding.scalar_bytes();
        if bytes.len() != expected {
            return Err(format!(
                "vector groups need {expected} bytes, file has {}",
                bytes.len()
            ));
        }
        Ok(Groups {
            count,
            groups,
            encoding,
            dimensions,
            offsets_at,
            members_at,
            slots_at,
            vectors_at,
        })
    }

    /// Number of groups (nodes of the graph).
    pub fn len(&self) -> usize {
        self.groups
    }

    /// True if there are no groups.
    pub fn is_empty(&self) -> bool {
        self.groups == 0
    }

    /// How the members' vectors are stored.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Key-table indices of group `g`'s members (representative first), with each
    /// one's absolute member position.
    pub fn members<'a>(
        &self,
        bytes: &'a [u8],
        g: u64,
    ) -> std::result::Result<impl Iterator<Item = (usize, usize)> + 'a, String> {
        let g = usize::try_from(g).ok().filter(|&g| g < self.groups);
        let bad = || "a vector group is out of range".to_string();
        let g = g.ok_or_else(bad)?;
        let lo = u32_at(bytes, self.offsets_at + 4 * g).ok_or_else(bad)? as usize;
        let hi = u32_at(bytes, self.offsets_at + 4 * (g + 1)).ok_or_else(bad)? as usize;
        if lo >= hi || hi > self.count {
            return Err(bad());
        }
        let (count, at) = (self.count, self.members_at);
        Ok((lo..hi).map_while(move |p| {
            let rank = u32_at(bytes, at + 4 * p)? as usize;
            (rank < count).then_some((p, rank))
        }))
    }

    /// The stored vector of the member at absolute position `p` of group `g` (not its
    /// representative).
    pub fn member_vector<'a>(&self, bytes: &'a [u8], g: u64, p: usize) -> Option<&'a [u8]> {
        self.stored(bytes, p.checked_sub(g as usize + 1)?)
    }

    fn stored<'a>(&self, bytes: &'a [u8], slot: usize) -> Option<&'a [u8]> {
        let size = self.dimensions * self.encoding.scalar_bytes();
        let at = self.vectors_at + slot.checked_mul(size)?;
        (slot < self.count - self.groups).then(|| bytes.get(at..at + size))?
    }

    /// Where the vector of key-table entry `rank` is.
    pub fn slot(&self, bytes: &[u8], rank: usize) -> Option<Slot> {
        let s = u32_at(bytes, self.slots_at + 4 * rank).filter(|_| rank < self.count)?;
        Some(if s & REP != 0 {
            Slot::Rep(u64::from(s & !REP))
        } else {
            Slot::Stored(s as usize)
        })
    }

    /// The stored vector at `slot`, as f32 (i8 divided by 127, as usearch does).
    pub fn decode(&self, bytes: &[u8], slot: usize) -> Option<Vec<f32>> {
        let raw = self.stored(bytes, slot)?;
        Some(match self.encoding {
            Encoding::I8 => raw.iter().map(|&b| f32::from(b as i8) / 127.0).collect(),
            Encoding::F32 => raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i8_is_cast_as_usearch_casts_it() {
        let v = [3.0f32, -4.0, 0.0];
        assert_eq!(to_i8(&v), vec![76, -101, 0]);
        assert_eq!(to_i8(&[0.0, 0.0]), vec![0, 0]);
    }

    #[test]
    fn the_avx2_dot_product_equals_the_portable_one() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        // Extremes, then pseudo-random bytes; lengths with and without a tail.
        let mut x = 0x9e37_79b9_u32;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        };
        for len in [0, 1, 15, 16, 17, 383, 384, 385] {
            for fill in [None, Some(127u8), Some(0x80), Some(0x81)] {
                let a: Vec<i8> = (0..len)
                    .map(|_| fill.unwrap_or_else(&mut byte) as i8)
                    .collect();
                let b: Vec<u8> = (0..len).map(|_| fill.unwrap_or_else(&mut byte)).collect();
                // SAFETY: AVX2 was detected above.
                let fast = unsafe { dot_i8_avx2(&a, &b) };
                assert_eq!(fast, dot_i8_portable(&a, &b), "length {len}, fill {fill:?}");
            }
        }
    }

    #[test]
    fn a_probe_scores_like_the_cosine_of_its_encoding() {
        let a = [0.6f32, 0.8, 0.0, 0.0];
        let b = [0.8f32, 0.6, 0.0, 0.0];
        for enc in [Encoding::I8, Encoding::F32] {
            let mut stored = Vec::new();
            enc.encode(&b, &mut stored);
            let sim = Probe::new(enc, &a).similarity(&stored);
            assert!((sim - 0.96).abs() < 0.01, "{enc:?}: {sim}");
        }
    }
}
