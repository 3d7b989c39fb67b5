"""Every vector of an index belongs to the model named with it (issue 41 item 5), over real
processes: a process whose integer model cannot be derived writes no vector into an index
of the derived model and searches it by words; opening an index with another model
re-embeds it in the background, saying how far meanwhile, without mixing the two."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from backtrail import _core
from backtrail.indexer import (
    MAX_PASSAGES,
    TYPE_PASSAGE,
    Indexer,
    Model,
    VectorModel,
    doc_id,
    embedding_text,
    parse_doc_id,
)
from backtrail.indexer import embedding as embedding_module
from backtrail.indexer.vectors import verdict
from backtrail.store import LEDGER_FILENAME, Ledger
from helpers import LOREM, cached_model, make_config
from mcp_support import BACKTRAIL, server_env, stdio_params, text

MEMORY_CHILD = r"""
import json, sys
from backtrail.config import Config
from backtrail.service import Memory

memory = Memory(Config.load(), client="child")
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    op = request["op"]
    if op == "status":
        stats = memory.stats()
        answer = {"model": stats.model, "reembedding": stats.lag.reembedding,
                  "vector_model": stats.lag.vector_model}
    elif op == "search":
        page = memory.search(request["query"], mode=request.get("mode"))
        answer = {"mode": page.mode, "notice": page.notice,
                  "urls": [r.url for r in page.results]}
    elif op == "capture":
        page = memory.capture_page(request["url"], text=request["text"], title=request["title"])
        answer = {"page_id": page.page_id}
    elif op == "index":
        lag = memory.catch_up()
        answer = {"vectors_caught_up": lag.vectors_caught_up}
    print(json.dumps(answer), flush=True)
memory.close()
"""

REEMBED_CHILD = r"""
import sys
from backtrail.config import Config
from backtrail.indexer import Indexer
from backtrail.indexer.embedding import load_model

config = Config.load(overrides={"vector_batch_passages": 4})
model = load_model(config.model_dir)
indexer = Indexer(config, model=lambda: model)
indexer.catch_up(progress=lambda done, total, phase: print(phase, done, total, flush=True))
print("finished", flush=True)
"""


def page_text(word: str) -> str:
    return "\n\n".join(f"{word} {n}: {LOREM}" for n in range(10))  # three passages


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """A process on ``home`` with embeddings on and this test's other settings."""
    return server_env(home, MCP_EMBEDDINGS="on", BACKTRAIL_EMBEDDINGS="1", **extra)


def backtrail(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([BACKTRAIL, *args], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


class MemoryChild:
    """A long-running process with a Memory (background indexing on), asked over pipes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", MEMORY_CHILD], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._answer() == {"ready": True}

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(self.process.communicate(timeout=60)[1])
        return dict(json.loads(line))

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> str:
        """Ends the process; returns what it logged."""
        _, logged = self.process.communicate(timeout=120)  # closes its input: it ends
        assert self.process.returncode == 0, logged
        return logged


@contextmanager
def memory_child(env: dict[str, str]) -> Iterator[MemoryChild]:
    child = MemoryChild(env)
    try:
        yield child
    finally:
        if child.process.poll() is None:
            child.process.kill()
            child.process.wait()


def stored_vectors(home: Path) -> dict[int, tuple[str, list[float] | None]]:
    """``{doc id: (embedded text, stored vector or None)}`` of every page passage."""
    found: dict[int, tuple[str, list[float] | None]] = {}
    ledger = Ledger(home / LEDGER_FILENAME, client="test")
    try:
        page_ids = sorted(ledger.pages_by_id(list(range(1, 200)), with_text=False))
    finally:
        ledger.close()
    assert page_ids
    with Indexer(make_config(home)) as indexer:
        for page_id in page_ids:
            for n in range(MAX_PASSAGES):
                doc = indexer.index.get(doc_id(TYPE_PASSAGE, page_id, n))
                if doc is None:
                    break
                found[doc["id"]] = (embedding_text(doc), doc.get("vector"))  # type: ignore[arg-type]
    return found


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def assert_vectors_of(
    home: Path, model: embedding_module.TextEmbedder, other: embedding_module.TextEmbedder
) -> int:
    """Every passage has a vector, and each is ``model``'s embedding of its text, told apart
    from ``other``'s; returns how many."""
    vectors = stored_vectors(home)
    assert vectors and all(vector is not None for _, vector in vectors.values())
    texts = [text for text, _ in vectors.values()]
    own, theirs = model.embed(texts), other.embed(texts)
    for (stored_text, vector), mine, alien in zip(vectors.values(), own, theirs, strict=True):
        assert vector is not None
        # The stored vector (f16) is this model's; the other model's differs by far more.
        assert cosine(vector, mine) > 0.9999, stored_text[:60]
        assert cosine(vector, mine) - cosine(vector, alien) > 10 * (1 - cosine(vector, mine))
    return len(vectors)


def packaged_as_is() -> _core.Embedder:
    """The packaged model run as it is (what a process runs when the derivation fails)."""
    files = embedding_module.model_files()
    return _core.Embedder(str(files.ort_library), str(files.model), str(files.tokenizer),
                          sha256=files.sha256)  # fmt: skip


def recorded_model(home: Path) -> VectorModel:
    with Indexer(make_config(home)) as indexer:
        return indexer.vector_model()


# -------------------------------------------------------------- who may write


def test_who_writes_the_vectors_of_an_index() -> None:
    derived = Model(object(), "dq1-aaaa")  # type: ignore[arg-type]
    fallback = Model(object(), "aaaa", "cannot write the cache")  # type: ignore[arg-type]
    custom = Model(object(), "custom-bbbb")  # type: ignore[arg-type]
    nobody = VectorModel(generation=4)
    of_derived = VectorModel("dq1-aaaa", generation=2)
    of_fallback = VectorModel("aaaa", fallback=True, generation=2)
    for model in (derived, fallback, custom):  # an index no model has claimed: the first
        assert verdict(nobody, model, 0, may_switch=True) == "switch"
    assert verdict(of_derived, derived, 0, may_switch=False) == "own"
    # a fallback never takes another model's index; the intended model replaces it
    assert verdict(of_derived, fallback, 2, may_switch=True) == "defer"
    assert verdict(of_fallback, derived, 9, may_switch=True) == "switch"
    assert verdict(of_fallback, fallback, 0, may_switch=True) == "own"
    # another model takes an index whose model was chosen before it opened it, not after
    assert verdict(of_derived, custom, 2, may_switch=True) == "switch"
    assert verdict(of_derived, custom, 1, may_switch=True) == "defer"
    # while a browser host runs (not this process), the backlog and the model are its own
    assert verdict(of_derived, custom, 2, may_switch=False) == "defer"


# ---------------------------------------------------- a failed derivation


def test_a_process_that_cannot_derive_the_model_writes_no_vector_into_the_index(
    data_home: Path, ledger: Ledger, tmp_path: Path
) -> None:
    for n in range(6):
        ledger.capture_page(f"https://example.com/{n}", text=page_text(f"topic{n}"),
                            title=f"Topic {n}")  # fmt: skip
    derived_env = env_for(data_home)
    backtrail(derived_env, "index")
    claimed = recorded_model(data_home)
    assert claimed == VectorModel(cached_model().identity, generation=1)
    # The derived model is kept in the user's cache directory: one that cannot be created
    # (a file stands where it would be) makes the derivation fail in this process only.
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    failing_env = env_for(data_home, XDG_CACHE_HOME=str(blocked))
    with memory_child(failing_env) as failing:
        # It indexes its own captures while the derived model's `backtrail index` runs.
        running = subprocess.Popen([BACKTRAIL, "index"], env=derived_env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        for n in range(4):
            failing.ask("capture", url=f"https://failing.example/{n}", title=f"Own {n}",
                        text=page_text(f"zanzibar{n}"))  # fmt: skip
        assert running.wait(timeout=600) == 0, running.communicate()[1]
        late = failing.ask("capture", url="https://failing.example/late", title="Late",
                           text=page_text("kilimanjaro"))  # fmt: skip
        assert failing.ask("index") == {"vectors_caught_up": False}
        found = failing.ask("search", query="zanzibar2")
        assert found["urls"][0] == "https://failing.example/2"
        assert found["mode"] == "bm25"
        assert found["notice"].startswith("searched by words only: the index's vectors are of "
                                          f"{claimed.identity}")  # fmt: skip
        assert "deriving the integer model failed" in found["notice"]
        assert found["notice"].endswith("; a fallback never replaces another model's vectors")
        status = failing.ask("status")
        assert status["model"].startswith("not used: ")
        assert status["vector_model"] == claimed.identity
        logged = failing.close()
    assert "running the packaged model as it is" in logged
    # Its own passages wait for the derived model: it gave none of them a vector.
    vectors = stored_vectors(data_home)
    waiting = [d for d in vectors if parse_doc_id(d).entity_id == late["page_id"]]
    assert waiting and all(vectors[d][1] is None for d in waiting)
    words = backtrail(failing_env, "index")
    assert "This process writes no embeddings: the index's vectors are of" in words.stdout
    doctor = subprocess.run([BACKTRAIL, "doctor", "--json"], env=failing_env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    checks = json.loads(doctor.stdout)
    (embedder,) = [c for c in checks["checks"] if c["check"] == "embedder"]
    assert not embedder["ok"] and "deriving the integer model failed" in embedder["detail"]
    assert recorded_model(data_home) == claimed  # never switched, never cleared
    backtrail(derived_env, "index")
    assert_vectors_of(data_home, cached_model().embedder, packaged_as_is())


# ------------------------------------------------------------ another model


@pytest.mark.anyio
async def test_another_model_re_embeds_the_index_in_the_background_and_says_so(
    data_home: Path, ledger: Ledger, tmp_path: Path
) -> None:
    for n in range(12):
        ledger.capture_page(f"https://example.com/{n}", text=page_text(f"topic{n}"),
                            title=f"Topic {n}")  # fmt: skip
    derived_env = env_for(data_home)
    backtrail(derived_env, "index")
    derived = recorded_model(data_home)
    # A user's model directory: the packaged file and the shipped tokenizer, run as they
    # are (so its vectors are not the derived model's) under an identity of its own.
    files = embedding_module.model_files()
    own_dir = tmp_path / "my-model"
    own_dir.mkdir()
    shutil.copy(files.model, own_dir / "model.onnx")
    shutil.copy(files.tokenizer, own_dir / "tokenizer.json")
    custom_env = env_for(data_home, BACKTRAIL_MODEL_DIR=str(own_dir))
    identity = embedding_module.model_files(own_dir).identity
    assert identity.startswith("custom-") and identity != derived.identity
    with memory_child(derived_env) as earlier:  # a derived-model process already running
        assert earlier.ask("search", query="topic3")["mode"] == "hybrid"
        # The custom model's first batches, then the process is killed mid-way.
        child = subprocess.Popen(
            [sys.executable, "-c", REEMBED_CHILD], env=custom_env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            # Reported after each piece of 4 embedded, before its commit: 12 reported
            # means at least 8 committed.
            while not (line.startswith("vectors ") and int(line.split()[1]) >= 12):
                assert line, child.communicate(timeout=60)[1]
                line = child.stdout.readline()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        switched = recorded_model(data_home)
        assert switched == VectorModel(identity, False, derived.generation + 1, derived.identity)
        stats = json.loads(backtrail(custom_env, "stats", "--json").stdout)
        lag = stats["lag"]
        assert lag["reembedding"] and lag["vector_model"] == identity
        done = lag["passages"] - lag["vectors"]
        assert 8 <= done < lag["passages"]
        shown = backtrail(custom_env, "stats").stdout
        assert f"re-embedding for the new model: {done} of {lag['passages']} passages" in shown
        found = json.loads(backtrail(custom_env, "search", "topic5", "--json").stdout)
        assert found["notice"].startswith(f"re-embedding for the new model: {done} of ")
        # The process that was running before keeps its model away from the new vectors:
        # it searches by words and does not take the index back.
        answer = earlier.ask("search", query="topic5")
        assert answer["mode"] == "bm25" and answer["urls"][0] == "https://example.com/5"
        assert answer["notice"] == (
            f"searched by words only: the index's vectors are of {identity}; this process "
            f"runs {derived.identity}; a process started after this one chose that model"
        )
        assert earlier.ask("status")["model"].startswith("not used: ")
        assert earlier.ask("index") == {"vectors_caught_up": False}
        assert recorded_model(data_home) == switched
        # A server with the new model finishes the re-embedding in the background, saying
        # how far it is meanwhile.
        params = stdio_params(data_home, MCP_EMBEDDINGS="on", BACKTRAIL_MODEL_DIR=str(own_dir))
        async with Client(params, mode="legacy") as client:
            deadline = time.monotonic() + 600
            while True:
                status = await client.call_tool("get_status", {})
                if status.structured_content["vectors_caught_up"]:
                    break
                if status.structured_content["reembedding"]:
                    assert "; re-embedding for the new model: " in text(status)
                assert time.monotonic() < deadline, "the re-embedding never ended"
                await anyio.sleep(0.2)
            assert "re-embedding" not in text(status)
            assert status.structured_content["model"] == "ready"
            found = await client.call_tool("search_browsing", {"query": "topic5"})
            assert found.structured_content["mode"] == "hybrid"
            assert found.structured_content.get("notice") is None
        earlier.close()
    assert recorded_model(data_home) == switched
    assert_vectors_of(data_home, packaged_as_is(), cached_model().embedder)
