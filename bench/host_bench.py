"""Native-host benchmark and long fuzz run.

``burst``: a real host subprocess in a fresh data directory, real frames on its stdin,
and a burst of ``capture_page`` requests; reports acknowledged captures per second
(target: >= 200/s) and, afterwards, how long the background indexer took to make them
searchable. Two delivery patterns:

- ``pipelined``: the whole burst is written at once and acknowledgements are read as
  they come (the host reads ahead and shares one durable commit among the captures
  waiting), e.g. several extension profiles, or a queue drained without waiting;
- ``lockstep``: one request in flight, the next sent when its answer arrives (the
  extension's queue discipline in PROTOCOL.md section 4): bound by one fsync per ack.

Bodies are ``text`` (``content_type: "text"``) or ``html`` (a ~6 KB article the host
extracts with trafilatura before storing).

``fuzz``: mutated frames (bit flips, cut frames, wrong types, random members, bad
lengths) through a real host for a while, checking that each frame gets exactly one
well-formed answer, the host stays up, and what was stored before is still there; with
``--hypothesis`` also the property tests of tests/test_host_protocol_fuzz.py with the
``long`` profile.

Run from the repository root::

    .venv/bin/python -m bench.host_bench burst [--captures 2000] [--embeddings]
    .venv/bin/python -m bench.host_bench fuzz [--seconds 600] [--hypothesis]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR, say, summarize_ms, write_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from host_client import HostProcess, capture_fields, frame  # noqa: E402

TARGET_PER_SECOND = 200.0
CODES = set(range(1, 20))

ARTICLE = (
    "<html lang='en'><head><title>Write-ahead logging {n}</title></head><body><nav>Home "
    "Docs Blog</nav><article><h1>Write-ahead logging {n}</h1>"
    + "".join(
        f"<p>Section {i}: a transaction appends its changes to the journal before the data "
        "pages change; checkpoints copy the journal back and let it restart. Page {n}.</p>"
        for i in range(40)
    )
    + "</article><footer>(c) example</footer></body></html>"
)


def captures(count: int, kind: str, start: int = 0) -> list[dict[str, Any]]:
    out = []
    for n in range(start, start + count):
        body = ARTICLE.replace("{n}", str(n)) if kind == "html" else (
            f"Page {n}: a transaction appends its changes to the journal. " * 40
        )  # fmt: skip
        fields = capture_fields(f"https://bench.example/{kind}/{n}", body, visit_id=f"v-{n}",
                                html=kind == "html", time=1_732_924_800_000 + n * 1000)  # fmt: skip
        out.append({"id": f"c-{kind}-{n}", "type": "capture_page", **fields})
    return out


def burst(host: HostProcess, messages: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    data = [frame(m) for m in messages]
    latencies: list[float] = []
    started = time.perf_counter()
    if mode == "pipelined":
        writer = threading.Thread(target=lambda: host.send_raw(b"".join(data)))
        writer.start()
        answers = [host.recv(600) for _ in data]
        writer.join()
    else:
        answers = []
        for item in data:
            sent = time.perf_counter()
            host.send_raw(item)
            answers.append(host.recv(600))
            latencies.append(time.perf_counter() - sent)
    elapsed = time.perf_counter() - started
    failed = [a for a in answers if not a.get("ok")]
    if failed:
        raise SystemExit(f"{len(failed)} captures failed, e.g. {failed[0]}")
    result: dict[str, Any] = {"captures": len(data), "seconds": round(elapsed, 3),
                              "per_second": round(len(data) / elapsed, 1)}  # fmt: skip
    if latencies:
        result["ack_latency"] = {k: round(v, 2) for k, v in summarize_ms(latencies).items()}
    return result


def wait_indexed(host: HostProcess, limit: float = 900.0) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        status = host.ok("status")
        if status["index_lag"] == 0:
            return time.perf_counter() - started
        time.sleep(0.2)
    return float("nan")


def run_burst(args: argparse.Namespace) -> None:
    results: dict[str, Any] = {"target_per_second": TARGET_PER_SECOND,
                               "embeddings": args.embeddings, "runs": []}  # fmt: skip
    env = {"BACKTRAIL_EMBEDDINGS": "1" if args.embeddings else "0",
           "BACKTRAIL_INDEXER_DEBOUNCE": "0.5"}  # fmt: skip
    plan = [("text", "pipelined", args.captures), ("text", "lockstep", args.captures // 2),
            ("html", "pipelined", args.html_captures),
            ("html", "lockstep", args.html_captures // 2)]  # fmt: skip
    for kind, mode, count in plan:
        with tempfile.TemporaryDirectory(prefix="host-bench-") as tmp:
            with HostProcess(Path(tmp) / "home", env=env) as host:
                host.hello()
                host.send_raw(b"".join(frame(m) for m in captures(20, kind, 10**6)))  # warm-up
                for _ in range(20):
                    host.recv(600)
                run = {"body": kind, "mode": mode, **burst(host, captures(count, kind), mode)}
                run["indexed_after_s"] = round(wait_indexed(host), 2)
                assert host.wait(600) == 0
            results["runs"].append(run)
            say(f"{kind:4} {mode:9} {run['captures']:5} captures: {run['per_second']:7.1f}/s "
                f"acknowledged (target {TARGET_PER_SECOND:.0f}/s); searchable "
                f"{run['indexed_after_s']} s after the last ack")  # fmt: skip
    path = RESULTS_DIR / f"host-burst-{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json(path, results)
    say(f"wrote {path}")


# --------------------------------------------------------------------- fuzzing


def mutate(rng: random.Random, message: dict[str, Any]) -> bytes:
    """One bad (or good) frame made from a valid message."""
    body = json.dumps(message, separators=(",", ":")).encode()
    choice = rng.randrange(9)
    if choice == 0:  # flip bytes
        data = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        body = bytes(data)
    elif choice == 1:  # cut the body short but keep the frame whole
        body = body[: rng.randrange(1, len(body))]
    elif choice == 2:  # a member of the wrong type
        key = rng.choice([k for k in message if k != "id"] or ["type"])
        message = {**message, key: rng.choice([None, 1, -1, "x", [], {}, True, 1.5, "é" * 300])}
        body = json.dumps(message).encode()
    elif choice == 3:  # drop a member
        key = rng.choice(list(message))
        body = json.dumps({k: v for k, v in message.items() if k != key}).encode()
    elif choice == 4:  # an unknown type or a URL with a forbidden scheme
        message = dict(message, type=rng.choice(["nope", "", "HELLO"]))
        if "url" in message:
            message["url"] = rng.choice(["javascript:void(0)", "data:,x", "file:///x"])
        body = json.dumps(message).encode()
    elif choice == 5:  # random bytes
        body = rng.randbytes(rng.randint(1, 300))
    return struct.pack("<I", len(body)) + body


def run_fuzz(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    templates = captures(50, "text") + [
        {"id": "s", "type": "status"}, {"id": "q", "type": "search", "query": "journal"},
        {"id": "b", "type": "bookmark_upsert", "bookmarks": [{"browser_id": "1",
         "url": "https://b.example/", "title": None, "folder": None, "added_time": None}]},
        {"id": "t", "type": "tab_snapshot", "time": 0, "tabs": [{"tab_id": 1, "window_id": 1,
         "url": "https://t.example/", "title": "T", "active": True}]},
    ]  # fmt: skip
    sent = answered = sessions = 0
    deadline = time.monotonic() + args.seconds
    with tempfile.TemporaryDirectory(prefix="host-fuzz-") as tmp:
        home = Path(tmp) / "home"
        while time.monotonic() < deadline:
            sessions += 1
            with HostProcess(home) as host:
                host.hello()
                kept = f"https://kept.example/{sessions}"
                fields = capture_fields(kept, "kept words", visit_id=f"k{sessions}")
                host.ok("capture_page", **fields)
                for _ in range(args.batch):
                    message = dict(rng.choice(templates), id=f"f-{sent}")
                    host.send_raw(mutate(rng, message))
                    sent += 1
                    answer = host.recv(120)
                    answered += 1
                    assert set(answer) in ({"id", "ok", "result"}, {"id", "ok", "error"}), answer
                    if not answer["ok"]:
                        assert answer["error"]["code"] in CODES, answer
                exported = host.ok("search", query="kept words", limit=50)["results"]
                assert kept in [r["url"] for r in exported], "a stored page was lost"
                status = 0
                ending = rng.random()
                if ending < 0.2:  # end inside a frame
                    host.send_raw(struct.pack("<I", 1000) + b'{"id":"cut"')
                    host.close_stdin()
                    assert host.recv(60)["error"]["code"] == 1
                elif ending < 0.3:  # a length prefix that cannot be resynchronised
                    host.send_raw(struct.pack("<I", rng.choice([0, 2**31])))
                    assert host.recv(60)["error"]["code"] == 1
                    status = 1
                assert host.wait(120) == status, host.stderr()[-2000:]
                assert host.junk == []
    say(f"fuzz: {sent} frames in {sessions} sessions, {answered} answered, host never failed")
    if args.hypothesis:
        env = dict(os.environ, BACKTRAIL_FUZZ_PROFILE="long")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "test_host_protocol_fuzz.py"]  # fmt: skip
        raise SystemExit(subprocess.call(command, cwd=ROOT / "tests", env=env))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    burst_args = sub.add_parser("burst", help="acknowledged captures per second")
    burst_args.add_argument("--captures", type=int, default=2000)
    burst_args.add_argument("--html-captures", type=int, default=300)
    burst_args.add_argument("--embeddings", action="store_true",
                            help="let the background indexer embed (slower catch-up)")  # fmt: skip
    fuzz_args = sub.add_parser("fuzz", help="long fuzz run")
    fuzz_args.add_argument("--seconds", type=float, default=600)
    fuzz_args.add_argument("--batch", type=int, default=500, help="frames per host session")
    fuzz_args.add_argument("--seed", type=int, default=1)
    fuzz_args.add_argument("--hypothesis", action="store_true")
    args = parser.parse_args()
    if args.command == "fuzz":
        run_fuzz(args)
    else:
        if args.command is None:
            args = burst_args.parse_args([])
        run_burst(args)


if __name__ == "__main__":
    main()
