"""The real-corpus section of ``bench.run_core``: baselines in this process, then one worker
subprocess per ``--engine`` (``python -m bench.run_core --worker``) measuring its core."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from backtrail import _core
from backtrail.indexer import embedding
from bench import baselines, common, corpus, metrics, real_corpus, vector_cache
from bench.common import say
from bench.run_core_measure import (
    build_core,
    cold_start,
    embedding_section,
    latency,
    ranked_ids,
)

#: The human-written query sets (read from shared/eval at bench time, never copied here).
EVAL_DIR = Path(
    os.environ.get("BACKTRAIL_EVAL_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "eval"
)
HUMAN_SETS = ("dev-pypg.jsonl", "dev-big.jsonl")


def human_queries(eval_dir: Path) -> list[dict[str, Any]]:
    """The dev query sets: qid, query, family (``human <kind>``), targets (page URL ids)."""
    out = []
    for name in HUMAN_SETS:
        path = eval_dir / name
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing (set BACKTRAIL_EVAL_DIR)")
        for q in common.read_jsonl(path):
            out.append(
                {
                    "qid": q["id"],
                    "query": q["query"],
                    "family": f"human {q['kind']}",
                    "set": name.removesuffix(".jsonl"),
                    "targets": q["targets"],
                }
            )
    return out


def sampled_queries(passages: Sequence[dict[str, Any]], n: int, seed: int = 0) -> list[dict]:
    """n speed probes drawn from the real passages: word runs (3-7 words) and sentences."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < n:
        p = passages[rng.randrange(len(passages))]
        words = p["body"].split()
        if len(out) % 2 == 0:
            if len(words) < 8:
                continue
            k = rng.randint(3, 7)
            i = rng.randrange(len(words) - k)
            text, family = " ".join(words[i : i + k]), "sampled word run"
        else:
            sentences = [
                x for x in p["body"].replace("\n", " ").split(". ") if 8 <= len(x.split()) <= 30
            ]
            if not sentences:
                continue
            text, family = rng.choice(sentences), "sampled sentence"
        out.append({"qid": f"s{len(out):04d}", "query": text, "family": family, "targets": []})
    return out


def page_scores(
    ranked_urls: dict[str, list[str]], qs: Sequence[dict[str, Any]], k: int = 10
) -> dict[str, dict[str, float]]:
    """Page MRR@k and recall@k (a target among the first k pages) per query set and kind."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for q in qs:
        if not q["targets"]:
            continue
        pages = metrics.unique_in_order(ranked_urls[q["qid"]])[:k]  # type: ignore[arg-type]
        rank = next((i for i, u in enumerate(pages, 1) if u in q["targets"]), None)
        pair = (1.0 / rank if rank else 0.0, 1.0 if rank else 0.0)
        for g in (q["set"], f"{q['set']} {q['family'].removeprefix('human ')}", "all"):
            groups.setdefault(g, []).append(pair)
    return {
        g: {
            "n": len(v),
            "mrr@10": sum(a for a, _ in v) / len(v),
            "recall@10": sum(b for _, b in v) / len(v),
        }
        for g, v in groups.items()
    }


def real_engine_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything measured on one engine (the backtrail this interpreter imports).

    Runs in a subprocess per engine (``--engine NAME=PYTHON``), so that two builds of the
    core are measured in one run on the same passages, vectors, queries and baselines.
    """
    work = Path(spec["workdir"])
    texts, families = spec["texts"], spec["families"]
    qvecs = np.load(work / "qvecs.npy")
    exact_ids = np.load(work / "exact_ids.npy")
    mask = np.load(work / "mask.npy")
    vecs = np.load(work / "vectors.npy", mmap_mode="r")
    out: dict[str, Any] = {
        "core_version": getattr(_core, "__version__", "?"),
        "backtrail": str(Path(_core.__file__).parent),
    }
    if spec["embedding"]:
        say(f"[{spec['engine']}] embedding: ORT-Python vs the core on the same passages ...")
        out["embedding"] = embedding_section(spec["embed_texts"], texts)

    def docs() -> Iterator[dict[str, Any]]:
        j = 0
        chosen = (
            p
            for p in common.read_jsonl(spec["passages"])
            if p["set"] in (spec["sets"] or [p["set"]])
        )
        for p, has in zip(chosen, mask, strict=True):
            d = corpus.core_document(p)
            if has:
                d["vector"] = np.asarray(vecs[j], dtype=np.float32).tolist()
                j += 1
            yield d

    path = work / f"index-{spec['engine']}"
    say(f"[{spec['engine']}] building the core index over {len(mask):,} passages ...")
    out["build"] = build_core(
        path,
        docs(),
        quantization=spec["quantization"],
        connectivity=spec["connectivity"],
        expansion_add=spec["expansion_add"],
    )
    say(
        f"[{spec['engine']}]   {out['build']['docs_per_s']:,.0f} docs/s, "
        f"{common.human_bytes(out['build']['bytes'])}"
    )
    out["cold_start"] = cold_start(path, texts[0])
    out["cold_start_hybrid_given_vector"] = cold_start(path, texts[1], qvecs[1])
    index = _core.Index(str(path))
    vlist = [v.tolist() for v in qvecs]
    sweep = []
    for ef in spec["expansions"]:
        # Top 10 asked of the vector side alone, as of numpy (a hybrid search pools 50).
        opts = {"group": False, "expansion": ef, "vector_candidates": 10}

        def vector(v: list[float], o: dict[str, Any] = opts) -> list[dict[str, Any]]:
            return index.search("", 10, mode="vector", query_vector=v, options=o)

        found = [ranked_ids(vector(v)) for v in vlist]
        lat = latency(vector, vlist)
        sweep.append(
            {
                "expansion": ef,
                "recall@10": baselines.recall_at_k(found, exact_ids),
                **{f"vector_{k}": x for k, x in lat.items()},
            }
        )
        say(
            f"[{spec['engine']}]   vector ef={ef}: recall@10 {sweep[-1]['recall@10']:.3f}, "
            f"p50 {lat['p50_ms']:.3f} ms"
        )
    out["vector_sweep"] = sweep
    out["bm25"] = latency(lambda q: index.search(q, 10, mode="bm25"), texts, families)
    out["bm25_ungrouped"] = latency(
        lambda q: index.search(q, 10, mode="bm25", options={"group": False}), texts, families
    )
    out["hybrid_given_vector"] = latency(
        lambda i: index.search(texts[i], 10, mode="hybrid", query_vector=vlist[i]),
        list(range(len(texts))),
        families,
    )
    embedder = embedding.load_embedder(sessions=2, threads=1, batch_size=1)
    with_model = _core.Index(str(path), embedder=embedder)
    # warmed up on other wordings: the core keeps recent query vectors, and a timed query
    # must pay for its embedding
    out["hybrid_with_embedding"] = latency(
        lambda q: with_model.search(q, 10),
        texts,
        families,
        warmup=[f"{t} warm-up" for t in texts[:30]],
    )
    say(
        f"[{spec['engine']}]   bm25 p50 {out['bm25']['p50_ms']:.2f} ms, hybrid incl. embedding "
        f"p50 {out['hybrid_with_embedding']['p50_ms']:.2f} ms"
    )
    human = [i for i, f in enumerate(families) if f.startswith("human")]
    ranked: dict[str, dict[int, list[str]]] = {}
    for mode in ("bm25", "vector", "hybrid"):
        ranked[mode] = {
            i: [
                h["url"]
                for h in index.search(
                    texts[i], 10, mode=mode, query_vector=None if mode == "bm25" else vlist[i]
                )
            ]
            for i in human
        }
    out["ranked_urls"] = ranked
    if not spec["keep"]:
        shutil.rmtree(path, ignore_errors=True)
    return out


def run_engine(name: str, python: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The worker of one engine in its own interpreter; its JSON result."""
    work = Path(spec["workdir"])
    spec_path, out_path = work / f"spec-{name}.json", work / f"result-{name}.json"
    common.write_json(spec_path, {**spec, "engine": name})
    out_path.unlink(missing_ok=True)
    env = dict(os.environ)
    # the bench package from this tree; backtrail from the engine's own site-packages
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    subprocess.run(
        [python, "-m", "bench.run_core", "--worker", str(spec_path), str(out_path)],
        check=True,
        env=env,
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    return json.loads(out_path.read_text(encoding="utf-8"))


def real_section(args: argparse.Namespace) -> dict[str, Any]:
    """The real corpus at full size: baselines here, the core once per engine.

    ``--sets`` restricts the corpus to some of the seven packages (and the human queries to
    those with a target among them): a smaller run, not the targets' full size.
    """
    passages = real_corpus.load_passages()
    if args.sets:
        passages = [p for p in passages if p["set"] in args.sets]
    ids = np.array([p["id"] for p in passages], dtype=np.int64)
    mask, vecs = vector_cache.corpus_vectors(passages)
    pages = len({p["page_id"] for p in passages})
    say(
        f"real corpus: {len(passages):,} passages of {pages:,} pages; "
        f"{int(mask.sum()):,} with cached vectors"
    )
    if not mask.any():
        raise SystemExit("no cached vectors yet: run python -m bench.vector_cache first")
    if not mask.all():
        say(
            "  WARNING: the vector cache is incomplete (python -m bench.vector_cache resumes "
            "it); vector figures cover only the passages that have vectors"
        )
    urls = {p["url"] for p in passages}
    human_all = human_queries(args.eval_dir)
    qs = [q for q in human_all if set(q["targets"]) & urls]
    if len(qs) < len(human_all):
        say(f"  {len(human_all) - len(qs)} human queries left out: no target in these sets")
    qs += sampled_queries(passages, args.sampled)
    texts, families = [q["query"] for q in qs], [q["family"] for q in qs]
    work = args.workdir / "real"
    work.mkdir(parents=True, exist_ok=True)
    embedder = embedding.load_embedder(sessions=2, threads=1, batch_size=1)
    qvecs = np.array(embedder.embed(texts), dtype=np.float32)
    del embedder
    vec_ids = ids[mask]
    say(f"exact top-10 of {len(qs)} queries over {len(vec_ids):,} vectors (numpy) ...")
    exact, _ = baselines.exact_topk(vecs, qvecs, 10)
    exact_ids = vec_ids[exact]
    np.save(work / "qvecs.npy", qvecs)
    np.save(work / "exact_ids.npy", exact_ids)
    np.save(work / "mask.npy", mask)
    np.save(work / "vectors.npy", vecs)
    out: dict[str, Any] = {
        "passages": len(passages),
        "pages": pages,
        "with_vectors": int(mask.sum()),
        "sets": args.sets,
        "queries": len(qs),
        "queries_by_family": {f: families.count(f) for f in dict.fromkeys(families)},
    }
    bf = baselines.BruteForce(vecs, vec_ids)
    out["numpy"] = {
        "latency": latency(lambda v: bf.search(v, 10), list(qvecs)),
        "bytes": int(vecs.nbytes),
    }
    say(f"numpy exact p50 {out['numpy']['latency']['p50_ms']:.2f} ms")
    fts_path = real_corpus.real_dir() / f"fts5-{len(passages)}.sqlite"
    if not fts_path.exists():  # built under another name, so a killed build is never used
        say(f"building FTS5 over {len(passages):,} passages ...")
        tmp = fts_path.with_name(fts_path.name + ".tmp")
        out["fts5_build"] = baselines.build_fts5(tmp, iter(passages)).as_dict()
        tmp.replace(fts_path)
    fts = baselines.Fts5Index(fts_path)
    out["fts5"] = {
        "latency": latency(lambda q: fts.search(q, 10), texts, families),
        "bytes": common.dir_size(fts_path),
    }
    say(f"FTS5 bm25() p50 {out['fts5']['latency']['p50_ms']:.1f} ms")
    url_of = {p["id"]: p["url"] for p in passages}
    human = [q for q in qs if q["targets"]]
    fts_urls = {q["qid"]: [url_of[i] for i, _ in fts.search(q["query"], 50)] for q in human}
    out["quality"] = {"SQLite FTS5 bm25 (OR)": page_scores(fts_urls, human)}
    fts.close()
    step = max(1, len(passages) // args.embed_sample)
    embed_texts = [real_corpus.embedding_text(p) for p in passages[::step][: args.embed_sample]]
    del passages, url_of
    spec = {
        "workdir": str(work),
        "passages": str(real_corpus.build()[1]),
        "texts": texts,
        "families": families,
        "expansions": args.expansion,
        "quantization": args.quantization,
        "connectivity": args.connectivity[0],
        "expansion_add": args.expansion_add,
        "embedding": "embedding" not in args.skip,
        "embed_texts": embed_texts,
        "keep": args.keep,
        "sets": args.sets,
    }
    out["engines"] = {}
    for name, python in args.engine:
        say(f"== engine {name} ({python})")
        res = run_engine(name, python, spec)
        ranked = res.pop("ranked_urls")
        by_qid = {
            mode: {
                human_q["qid"]: ranked[mode][str(i)]
                for i, human_q in enumerate(qs)
                if human_q["targets"]
            }
            for mode in ranked
        }
        res["quality"] = {mode: page_scores(by_qid[mode], human) for mode in by_qid}
        out["engines"][name] = res
    return out


