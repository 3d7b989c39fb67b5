"""The Markdown summary of a several-node benchmark result (``bench/system/nodes.py``)."""

from __future__ import annotations

from typing import Any


def _s(value: Any) -> str:
    return "not reached" if value is None else f"{value:,.1f} s"


def _lat(d: dict[str, Any]) -> str:
    if not d or not d.get("n"):
        return "no calls"
    modes = ", ".join(f"{k} {v}" for k, v in sorted(d.get("modes", {}).items()))
    errors = f", {d['errors']} errors" if d.get("errors") else ""
    return (f"p50 {d['p50_ms']:.1f} / p95 {d['p95_ms']:.1f} ms ({int(d['n'])} calls"
            f"{'; ' + modes if modes else ''}{errors})")


def _load(what: str, lo: dict[str, Any]) -> str:
    return (f"load: {what}{lo['pages']:,} pages through the devices -> a text-only node, "
            f"window {lo['window']}")


def _fed(f: dict[str, Any]) -> str:
    ack = f["page_ack_ms"]
    return (f"**{f['pages_per_s']:.1f} pages/s** ({f['pages']:,} pages, {f['messages_per_s']:.1f} "
            f"messages/s, {f['seconds']:.1f} s; per page capture + visit p50 {ack['p50_ms']:.0f}"
            f" / p95 {ack['p95_ms']:.0f} ms; {f['retries']} retries, {f['errors']} errors)")


def rows(r: dict[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def add(figure: str, measured: str) -> None:
        out.append({"figure": figure, "measured": measured})

    sub = r.get("subset", {})
    if "ingest" in r:
        i = r["ingest"]
        add(f"ingest: {i['devices']} devices -> node-1, {i['pages']:,} pages "
            f"({i['passages']:,} passages, {i['content']}), window {i['window']}",
            _fed(i["fed"]) + ("" if i["complete"] else "; the nodes had NOT caught up"))
        for name, n in i["nodes"].items():
            add(f"{name}: every page searchable by words / by vectors, after the last ack",
                f"{_s(n['text_s_after_last_ack'])} / {_s(n['vectors_s_after_last_ack'])} "
                f"(from the first frame {_s(n['text_s_from_start'])} / "
                f"{_s(n['vectors_s_from_start'])})")
            add(f"{name}: search_browsing while the devices post", _lat(n["search_while_posting"]))
            add(f"{name}: search_browsing while the nodes embed the backlog",
                _lat(n["search_while_deriving"]))
            add(f"{name}: pages found by their title (top 10)", f"{n['found_by_title_of_20']}/20")
    if "load_subset" in r:
        add(_load("the vector subset, ", r["load_subset"]), _fed(r["load_subset"]))
    if "vectors" in r:
        v = r["vectors"]
        rate = v.get("passages_per_s")
        add(f"new node on {v['pages']:,} pages ({sub.get('passages', 0):,} passages): words / "
            "vectors, from its spawn",
            f"{_s(v.get('text_s'))} / {_s(v.get('vectors_s'))}"
            + (f"; embedding **{rate:.1f} passages/s**" if rate else ""))
        a = v.get("agreement")
        if a:
            add(f"{a['nodes'][0]}'s top 10 against {' and '.join(a['nodes'][1:])}'s, each "
                "dev query asked of all at once",
                f"the same for **{a['same_top10']}/{a['queries']}**, the same first result "
                f"for {a['same_first']}/{a['queries']}, mean overlap {a['mean_overlap']:.3f}"
                + ("" if a["ready"] else "; the earlier nodes had NOT caught up"))
    if "load" in r:
        add(_load("", r["load"]), _fed(r["load"]))
    if "catchup" in r:
        c = r["catchup"]
        add(f"new node on {c['pages']:,} pages: every page searchable by words, from its spawn",
            f"**{_s(c.get('text_s'))}** (pages found by title: {c.get('found_by_title')})")
        if c.get("vectors_s_extrapolated"):
            add(f"... and by vectors ({c['passages']:,} passages), EXTRAPOLATED from the "
                "embedding rate above", f"~{c['vectors_s_extrapolated'] / 60:,.0f} min")
    if "compare" in r:
        k = r["compare"]
        ps, p50 = k["pages_per_s"], k["search_p50_ms"]
        add(f"one local host, {k['pages']:,} pages, window {k['window']}: pages/s SQLite / "
            "PostgreSQL", f"{ps['sqlite']:.1f} / {ps['postgresql']:.1f}: PostgreSQL "
            f"**{k['ratio_pages_per_s_pg_over_sqlite']:.2f}x** SQLite")
        add("search_browsing p50 over stdio (BM25), SQLite / PostgreSQL",
            f"{p50['sqlite']:.1f} / {p50['postgresql']:.1f} ms: PostgreSQL "
            f"**{k['ratio_search_p50_pg_over_sqlite']:.2f}x** SQLite")
    cpu = r.get("cpu_by_phase") or {}
    if cpu:
        add("other processes' CPU (cores, mean) per phase",
            ", ".join(f"{p} {v['others_cores_mean']:.2f}" for p, v in cpu.items()))
    return out
