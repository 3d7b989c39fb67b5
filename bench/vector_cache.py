"""Vectors of the real corpus, computed once by Backtrail's core embedder and cached.

Embedding ~150k passages takes hours on two cores, so it is done once, by
``python -m bench.vector_cache`` (run it under ``nice -n 19``, in the background), and
every benchmark run reads the cache.

What is embedded: each passage's embedding text, ``backtrail.indexer.embedding_text`` of its
document (title, newline, body), exactly what the indexer embeds. Identical texts (Rust's
re-exported items, inherited Javadoc) are embedded once.

Layout (``<data>/real/vectors-<model id>/``)
    shard-NNNNNN.npz   ``keys`` (n, 32) uint8: sha256 of model id + NUL + text;
                       ``vectors`` (n, 384) float32 unit rows, the core's output as is
A shard is written to a temporary name and renamed, so a kill at any point loses at most the
shard being embedded; the next run embeds only the texts whose key no shard holds. Progress
(rate, ETA) goes to stderr. The model id names the model file's sha256, so another model (or
a change of what the id covers) never reads stale vectors.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA_DIR, Progress
from bench.real_corpus import embedding_text, load_passages, real_dir

DIM = 384
SHARD = 1024


def model_id() -> str:
    """Names the vectors: the embedder, the packaged model file's sha256 (first 16 hex
    digits) and the derivation it runs as (``embedding.ModelFiles.identity``); ``custom``
    for the model directory ``BACKTRAIL_MODEL_DIR`` names, which the product then runs too
    (one at a time: the cache keeps one set of custom vectors)."""
    from backtrail.indexer import embedding

    return f"core-minilm-{embedding.model_files(model_dir()).identity}"


def model_dir() -> str | None:
    """The product's ``BACKTRAIL_MODEL_DIR`` setting, if any."""
    return os.environ.get("BACKTRAIL_MODEL_DIR") or None


def text_key(text: str, model: str) -> bytes:
    """The cache key of one text's vector."""
    return hashlib.sha256(model.encode() + b"\0" + text.encode("utf-8")).digest()


class VectorCache:
    """Shards of (key, vector) rows under one directory; see the module doc."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.rows: dict[bytes, tuple[int, int]] = {}
        self.shards: list[Path] = sorted(directory.glob("shard-*.npz"))
        for s, path in enumerate(self.shards):
            with np.load(path) as z:
                for r, key in enumerate(z["keys"]):
                    self.rows[key.tobytes()] = (s, r)

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, key: bytes) -> bool:
        return key in self.rows

    def add(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Write one new shard atomically."""
        self.dir.mkdir(parents=True, exist_ok=True)
        n = len(self.shards)
        path = self.dir / f"shard-{n:06d}.npz"
        tmp = self.dir / f"tmp-shard-{n:06d}.npz"
        key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)
        np.savez(tmp, keys=key_arr, vectors=np.asarray(vectors, dtype=np.float32))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        tmp.replace(path)
        self.shards.append(path)
        for r, key in enumerate(keys):
            self.rows[key] = (n, r)

    def matrix(self, keys: Sequence[bytes]) -> np.ndarray:
        """(len(keys), DIM) float32 in the order of keys; KeyError names a missing one."""
        out = np.empty((len(keys), DIM), dtype=np.float32)
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for i, key in enumerate(keys):
            s, r = self.rows[key]
            by_shard.setdefault(s, []).append((i, r))
        for s, pairs in by_shard.items():
            with np.load(self.shards[s]) as z:
                vecs = z["vectors"]
            idx = np.array(pairs, dtype=np.int64)
            out[idx[:, 0]] = vecs[idx[:, 1]]
        return out


def cache_dir(data_dir: Path = DATA_DIR, model: str | None = None) -> Path:
    return real_dir(data_dir) / f"vectors-{model or model_id()}"


def passage_keys(passages: Sequence[dict[str, Any]], model: str) -> list[bytes]:
    """The cache key of every passage's embedding text, in passage order."""
    return [text_key(embedding_text(p), model) for p in passages]


def embed_corpus(
    data_dir: Path = DATA_DIR,
    *,
    sessions: int = 2,
    threads: int = 1,
    batch_size: int = 1,
    shard: int = SHARD,
    limit: int | None = None,
    sets: Sequence[str] = (),
) -> dict[str, Any]:
    """Embed every passage text the cache lacks (resumable; progress on stderr), only
    those of `sets` when given (their quality runs need no more)."""
    from backtrail.indexer import embedding

    model = model_id()
    passages = load_passages(data_dir)
    if sets:
        passages = [p for p in passages if p["set"] in sets]
    texts: dict[bytes, str] = {}
    for p in passages:
        text = embedding_text(p)
        texts.setdefault(text_key(text, model), text)
    cache = VectorCache(cache_dir(data_dir, model))
    todo = [k for k in texts if k not in cache]
    if limit is not None:
        todo = todo[:limit]
    say = sys.stderr.write
    say(
        f"{len(passages):,} passages, {len(texts):,} distinct texts, {len(cache):,} cached, "
        f"{len(todo):,} to embed ({sessions} sessions x {threads} threads, batch {batch_size})\n"
    )
    progress = Progress("embed", len(cache) + len(todo), len(cache), every=30)
    if todo:
        embedder = embedding.load_embedder(
            model_dir(), sessions=sessions, threads=threads, batch_size=batch_size
        )
        for start in range(0, len(todo), shard):
            keys = todo[start : start + shard]
            vectors = np.asarray(embedder.embed([texts[k] for k in keys]), dtype=np.float32)
            cache.add(keys, vectors)
            progress.add(len(keys))
    progress.add(0, force=True)
    return {"passages": len(passages), "distinct_texts": len(texts), "cached": len(cache)}


def corpus_vectors(
    passages: Sequence[dict[str, Any]], data_dir: Path = DATA_DIR
) -> tuple[np.ndarray, np.ndarray]:
    """(row mask, vectors) for the passages: vectors of the cached ones, in passage order.

    ``mask[i]`` tells whether passage i has a cached vector; ``vectors`` holds only those
    rows. A complete cache gives an all-true mask.
    """
    model = model_id()
    keys = passage_keys(passages, model)
    cache = VectorCache(cache_dir(data_dir, model))
    mask = np.array([k in cache for k in keys], dtype=bool)
    return mask, cache.matrix([k for k, m in zip(keys, mask, strict=True) if m])


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--shard", type=int, default=SHARD, help="texts per cache shard")
    ap.add_argument("--limit", type=int, help="embed at most this many texts, then stop")
    ap.add_argument("--sets", default="", help="only these corpus sets, comma-separated")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = embed_corpus(
        sessions=args.sessions,
        threads=args.threads,
        batch_size=args.batch_size,
        shard=args.shard,
        limit=args.limit,
        sets=[name for name in args.sets.split(",") if name],
    )
    sys.stderr.write(f"{out} in {time.perf_counter() - t0:.0f} s\n")


if __name__ == "__main__":
    main()
