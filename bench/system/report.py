"""The system benchmark's verdicts on the issue's targets and its Markdown report."""

from __future__ import annotations

from typing import Any

from bench import common
from bench.system import mcpclients as mc


def _get(d: Any, *keys: Any) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue: measured value, target, PASS / MISS (or n/a)."""
    rows: list[dict[str, Any]] = []

    def add(name: str, value: Any, target: str, ok: bool | None, where: str = "") -> None:
        verdict = "n/a" if value is None or ok is None else ("PASS" if ok else "MISS")
        rows.append({"target": name, "measured": value if value is not None else "not run",
                     "goal": target, "result": verdict, "where": where})  # fmt: skip

    tiers = r.get("tiers", {})
    measured = [s for s in sorted(tiers, key=int) if "startup" in tiers[s] or "load" in tiers[s]]
    largest = measured[-1] if measured else None
    c2s_by_tier = {s: _get(tiers, s, "capture_to_searchable", "p95_s") for s in measured}
    c2s_by_tier = {s: v for s, v in c2s_by_tier.items() if v is not None}
    worst = max(c2s_by_tier, key=c2s_by_tier.__getitem__) if c2s_by_tier else None
    c2s = c2s_by_tier[worst] if worst else None
    add("capture-to-searchable p95 (typical page, idle; worst tier)", c2s, "<= 2 s",
        None if c2s is None else c2s <= 2.0, f"{int(worst):,} pages" if worst else "")
    if largest is not None:
        p95 = _get(tiers, largest, "load", f"{mc.SEARCH}/4 open loop", "p95_ms")
        big = int(largest) >= 100_000
        add(f"search_browsing p95, 4 clients at 2/s + ingest, {int(largest):,} pages", p95,
            "<= 25 ms at 100k", None if p95 is None or not big else p95 <= 25.0,
            "" if big else "tier below 100k: no verdict")
        spawn = _get(tiers, largest, "startup", "spawn_to_initialized_s", "median")
        add("MCP spawn-to-initialized (median)", spawn, "<= 0.25 s",
            None if spawn is None else spawn <= 0.25, f"{int(largest):,} pages")
        first = _get(tiers, largest, "startup", "first_search_s", "median")
        add("MCP first search incl. model load (median)", first, "<= 0.6 s",
            None if first is None else first <= 0.6, f"{int(largest):,} pages")
        # idle = the server whole (tools listed), no search yet; earlier runs sampled it
        # while the SDK was still loading
        idle = [row.get("rss_ready_mb") for s in measured
                for row in _get(tiers, s, "startup", "ready_runs") or []]  # fmt: skip
        idle = [v for v in idle if v is not None]
        add("MCP server RSS idle, ready (max over tiers)", max(idle) if idle else None,
            "<= 150 MB", None if not idle else max(idle) <= 150.0, "")
    q = _get(r, "quality", "scores")
    if q:
        h = q["hybrid (service)"]["all"]["passage_mrr@10"]
        b = q["bm25 (service)"]["all"]["passage_mrr@10"]
        v = q["vector (service)"]["all"]["passage_mrr@10"]
        add("hybrid MRR@10 > BM25-only and > vector-only", f"{h:.3f} vs {b:.3f} / {v:.3f}",
            "above both", h > b and h > v, f"{r['quality']['pages']:,} pages")
    t = r.get("temporal")
    if t:
        add("temporal: recent+frequent copy ranked first", t["first_rate"], "all groups",
            t["first_rate"] >= 1.0, f"{t['groups']} groups")
    s = r.get("soak")
    if s:
        add("soak errors", s["errors"], "0", s["errors"] == 0, f"{s['seconds']:.0f} s")
        g = max(s["rss_growth_after_warmup"].values())
        add("soak RSS growth after warm-up (worst process)", g, "< 10%", g < 0.10)
        fds = [s["fd_growth_after_warmup"]["host"], *s["fd_growth_after_warmup"]["mcp"]]
        add("soak fd growth (2nd-half floor - 1st-half floor, worst)", max(fds), "none (<= 0)",
            max(fds) <= 0)
        add("soak index (text) lag bounded", s["index_lag"]["max_after_warmup"],
            "not growing", s["index_lag_bounded"])
    return rows


def report(r: dict[str, Any]) -> str:
    out = ["## Targets", common.markdown_table(r.get("targets", []))]
    ing = r.get("ingest")
    if ing:
        title = "## Ingest (real HTML pages, real embedder, fresh store)"
        out += ["", title, common.markdown_table([
            {"pages": ing["pages"], "passages": ing["index_passages"],
             "offered/s": ing["offered_per_s"], "ack p95 ms": ing["ack_ms"]["p95_ms"],
             "sustained pages/s": ing["sustained_pages_per_s"],
             "sustained passages/s": ing["sustained_passages_per_s"],
             "drain pages/s": ing["drain_pages_per_s"],
             "drain passages/s": ing["drain_passages_per_s"],
             "MB / 1,000 pages": ing["disk_per_1000_pages_mb"],
             "host RSS idle MB": ing["host_rss_idle_mb"],
             "host RSS after MB": ing["host_rss_after_mb"]}])]  # fmt: skip
    rows, lat, start = [], [], []
    for size, t in sorted(r.get("tiers", {}).items(), key=lambda kv: int(kv[0])):
        b = t.get("build", {})
        rows.append({"pages": t.get("pages_in_store", b.get("pages_in_store")),
                     "captures/s (build)": b.get("captures_per_s"),
                     "MB / 1,000 pages": t.get("disk_per_1000_pages_mb", ""),
                     "capture→searchable p50 s": _get(t, "capture_to_searchable", "p50_s") or "",
                     "p95 s": _get(t, "capture_to_searchable", "p95_s") or "",
                     "host RSS idle MB": t.get("host_rss_idle_mb", ""),
                     "host RSS loaded MB": t.get("host_rss_after_load_mb", ""),
                     "MCP RSS loaded MB": max(t.get("mcp_rss_after_load_mb") or [0]) or ""})
        base = _get(t, "baseline", "total")
        for key, row in (t.get("load") or {}).items():
            if "/" not in key:
                continue
            tool, n = key.split("/")
            clients, _, how = n.partition(" ")
            lat.append({"pages": int(size), "tool": f"{tool} ({how})" if how else tool,
                        "clients": int(clients),
                        "p50 ms": row["p50_ms"], "p95 ms": row["p95_ms"],
                        "calls/s": row["calls_per_s"], "errors": int(row["errors"]),
                        "baseline p50 ms": base["p50_ms"] if base else "",
                        "baseline p95 ms": base["p95_ms"] if base else "",
                        "p50 ratio": row["p50_ms"] / base["p50_ms"] if base else "",
                        "p95 ratio": row["p95_ms"] / base["p95_ms"] if base else ""})
        st = t.get("startup")
        if st:
            start.append({"pages": int(size),
                          "spawn→initialized s": st["spawn_to_initialized_s"]["median"],
                          "first search s": st["first_search_s"]["median"],
                          "second search s": st["second_search_s"]["median"],
                          "RSS idle MB": st["rss_idle_mb"]["median"],
                          "RSS after search MB": st["rss_after_search_mb"]["median"]})
    if rows:
        out += ["", "## Tiers", common.markdown_table(rows)]
    if lat:
        out += ["", "## Query latency through MCP while the host ingests (baseline: in-process, "
                "idle, 1 client)", common.markdown_table(lat)]
    if start:
        out += ["", "## MCP server start (medians)", common.markdown_table(start)]
    q = r.get("quality")
    if q:
        qrows = []
        for label, scores in q["scores"].items():
            row: dict[str, Any] = {"engine": label}
            for fam in ("title", "deep", "lexical", "paraphrase", "all"):
                if fam in scores:
                    row[f"{fam} MRR@10"] = scores[fam]["passage_mrr@10"]
            row["all recall@10"] = scores["all"]["passage_recall@10"]
            row["all MRR@10 (corpus page)"] = scores["all"]["page_mrr@10"]
            qrows.append(row)
        out += ["", f"## Known-item quality ({q['queries']} queries, {q['pages']:,} pages"
                f"{', restricted to targets in the store' if q['restricted'] else ''})",
                common.markdown_table(qrows)]
    t = r.get("temporal")
    if t:
        out += ["", f"Temporal check (search_browsing vague): the often and recently visited "
                f"copy ranked first among the near-duplicates in {t['first_rate']:.0%} of the "
                f"groups with a copy in the top 10 ({t['groups']} groups, "
                f"{t['groups_without_any_copy_in_top10']} without; first of all results: "
                f"{t['first_overall_rate']:.0%})."]
    cpu = r.get("cpu_by_phase")
    if cpu:
        out += ["", "## CPU of other processes on the machine during each phase (cores of 2)",
                common.markdown_table([{"phase": k, **v} for k, v in cpu.items()])]
    s = r.get("soak")
    if s:
        out += ["", "## Soak", common.markdown_table([{
            "seconds": s["seconds"], "calls": s["calls"], "calls/s": s["calls_per_s"],
            "errors": s["errors"], "ingested": s["ingest_sent"],
            "search p50 ms": s["latency"][mc.SEARCH]["p50_ms"],
            "search p95 ms": s["latency"][mc.SEARCH]["p95_ms"],
            "vague p95 ms": s["latency"][mc.VAGUE]["p95_ms"],
            "RSS growth worst": max(s["rss_growth_after_warmup"].values()),
            "text lag max": s["index_lag"]["max_after_warmup"],
            "vector lag start→end": f"{s['vector_lag']['start']}→{s['vector_lag']['end']}",
        }])]  # fmt: skip
    return "\n".join(out)


