"""Phase 3 of the system benchmark: known-item quality through the service API and MCP
against the baselines, and the temporal check on near-duplicates."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from backtrail.config import Config
from backtrail.service import Memory
from bench import common, corpus, metrics
from bench.common import say
from bench.system import mcpclients as mc
from bench.system.hosts import MEASURE_ENV, capture_message, visit_message
from bench.system.pages import TEMPORAL_ROUND
from bench.system.state import BenchState, calls_ms, rrf

DAY_MS = 86_400_000
QUALITY_SIZE = 15_925  # the whole real corpus: one page per real passage


class QualityPhases(BenchState):
    # ------------------------------------------------------------- 3. quality

    async def quality(self, size: int, fts: Any, brute: Any) -> None:
        in_store = {p["id"] for p in self.corpus.passages[: min(size, len(self.corpus.passages))]}
        qs = [q for q in self.queries if q["passage_id"] in in_store]
        say(f"\n== quality: {len(qs)} known-item queries on {size:,} pages")
        runs: dict[str, dict[str, list[int]]] = {}
        service_ms: dict[str, dict[str, float]] = {}
        nodecay = {"search_decay_half_life_days": 0.0, "search_visit_weight": 0.0}
        for label, overrides, mode in (("bm25", nodecay, "bm25"), ("vector", nodecay, "vector"),
                                       ("hybrid", nodecay, "hybrid"),
                                       ("hybrid + decay", {}, None)):  # fmt: skip
            cfg = Config.load(self.home, overrides={"background_indexing": False, **overrides},
                              environ={})  # fmt: skip
            with Memory(cfg, client="bench-quality") as memory:
                memory.search(qs[0]["query"], limit=10, mode=mode)  # model load
                run, times = {}, []
                for q in qs:
                    t0 = time.perf_counter()
                    page = memory.search(q["query"], limit=10, mode=mode)
                    times.append(time.perf_counter() - t0)
                    run[q["qid"]] = self._ids(r.url for r in page.results)
                runs[f"{label} (service)"] = run
                service_ms[label] = common.summarize_ms(times)
        client = await mc.connect(self.home, "quality", self.logs, **self.mcp_env)
        try:
            mcp_run = {}
            await client.search(qs[0]["query"], limit=10)
            for q in qs:
                call = await client.search(q["query"], limit=10)
                mcp_run[q["qid"]] = self._ids(mc.result_urls(call))
            service_ms["hybrid + decay via MCP search_browsing"] = calls_ms(client.calls[1:])
            runs["hybrid + decay (MCP search_browsing)"] = mcp_run
        finally:
            await client.close()
        base: dict[str, dict[str, list[int]]] = {"FTS5 bm25()": {}, "numpy cosine": {},
                                                 "FTS5 + numpy RRF": {}}  # fmt: skip
        for q in qs:
            v = np.asarray(self.embedder.embed([q["query"]])[0], dtype=np.float32)
            f = [i for i, _ in fts.search(q["query"], 50)]
            b = [i for i, _ in brute.search(v, 50)]
            base["FTS5 bm25()"][q["qid"]] = f[:10]
            base["numpy cosine"][q["qid"]] = b[:10]
            base["FTS5 + numpy RRF"][q["qid"]] = rrf(f, b)[:10]
        runs.update({f"{k} (baseline)": v for k, v in base.items()})
        table = {}
        for label, run in runs.items():
            scores = metrics.score_run(run, qs, k=10)
            table[label] = scores
            s = scores["all"]
            say(f"  {label:36} MRR@10 {s['passage_mrr@10']:.3f} recall@10 "
                f"{s['passage_recall@10']:.3f} (corpus page level: {s['page_mrr@10']:.3f})")
        for label, row in service_ms.items():
            say(f"  latency {label:38} p50 {row['p50_ms']:.1f} ms, p95 {row['p95_ms']:.1f} ms"
                " (one caller, idle, no ingest)")
        self.results["quality"] = {"pages": size, "queries": len(qs), "scores": table,
                                   "latency_ms_idle_one_caller": service_ms,
                                   "restricted": len(qs) < len(self.queries)}  # fmt: skip

    async def temporal(self, groups: int) -> None:
        """Near-duplicate groups: 4 perturbed copies of one passage each, one of them
        visited often and recently; search_browsing(vague=true) must rank that one first."""
        say(f"\n== temporal: {groups} groups of 4 near-duplicates")
        in_store = {p["id"] for p in self.corpus.passages[: min(self.built, QUALITY_SIZE)]}
        pool = [q for q in self.queries
                if q["family"] == "deep" and q["passage_id"] in in_store]
        chosen = random.Random(11).sample(pool, min(groups, len(pool)))
        patterns = [[1, 3, 5, 8, 12, 20], [200], [120, 150], [60]]  # visit ages in days
        host = self.host(self.home, MEASURE_ENV)
        plan = []
        try:
            for g, q in enumerate(chosen):
                p = self.corpus.passages[self.corpus.index_of[q["passage_id"]]]
                favourite = g % 4
                others = [j for j in range(4) if j != favourite]
                urls = []
                for j in range(4):
                    ages = patterns[0] if j == favourite else patterns[1 + others.index(j)]
                    page = self.corpus.passage_page(p, TEMPORAL_ROUND + j,
                                                    self.now_ms - max(ages) * DAY_MS)
                    self.url_ids[page.url] = page.bench_id  # real vectors: not cached
                    answer = host.send(capture_message(page, f"tc{g}-{j}"))
                    assert answer.get("ok"), answer
                    for age in sorted(ages, reverse=True)[1:]:
                        answer = host.send(visit_message(page, f"tv{g}-{j}",
                                                         self.now_ms - age * DAY_MS))
                        assert answer.get("ok"), answer
                    urls.append(page.url)
                plan.append((q, urls, urls[favourite]))
            waited = host.wait_indexed(vectors=True, limit=900)
        finally:
            assert host.close() == 0
        client = await mc.connect(self.home, "temporal", self.logs, **self.mcp_env)
        firsts = among = 0
        rows = []
        try:
            for q, urls, fav in plan:
                call = await client.forgotten(q["query"], limit=10)
                got = mc.result_urls(call)
                ids = self._ids(got)
                # near-duplicates: every page made from the target passage (the original
                # page, its tier replicas and the four copies of this group)
                dups = [u for u, i in zip(got, ids, strict=True)
                        if i >= 0 and corpus.source_id(i) == q["passage_id"]]  # fmt: skip
                first = bool(got) and got[0] == fav
                top_dup = bool(dups) and dups[0] == fav
                firsts += first
                among += top_dup
                rows.append({"query": q["query"], "duplicates_in_top10": len(dups),
                             "variant_ranks": [got.index(u) + 1 if u in got else None
                                               for u in urls], "favourite": urls.index(fav),
                             "first_overall": first,
                             "first_among_duplicates": top_dup})  # fmt: skip
        finally:
            await client.close()
        n = max(1, len(plan))
        found = sum(1 for row in rows if row["duplicates_in_top10"]) or 1
        self.results["temporal"] = {"groups": len(plan), "first_rate": among / found,
                                    "first_rate_all_groups": among / n,
                                    "groups_without_any_copy_in_top10": len(plan) - found,
                                    "first_overall_rate": firsts / n,
                                    "vectors_waited_s": waited, "rows": rows}  # fmt: skip
        say(f"  favourite first among its near-duplicates in {among}/{found} groups with a "
            f"copy in the top 10 ({len(plan)} groups), first overall in {firsts}/{len(plan)}")

