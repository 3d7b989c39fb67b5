"""The Rust core as Python sees it: `backtrail._core` from the installed wheel."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from backtrail import _core
from backtrail.indexer import embedding

TEXTS = [
    "Dark mode reduces eye strain in the evening.",
    "PostgreSQL's VACUUM reclaims storage occupied by dead tuples.",
    "asyncio.gather runs awaitables concurrently.",
    "The quick brown fox jumps over the lazy dog.",
    "数据库索引可以加快查询速度。",
    "Реляционная база данных хранит таблицы.",
    "Η σχεσιακή βάση δεδομένων αποθηκεύει πίνακες.",
    "user/theme: dark mode",
    "deploy/region: eu-west-1",
    "A B-tree index keeps keys sorted for range scans. " * 40,
    "Rust's borrow checker enforces aliasing XOR mutation.",
    "Headless Chromium loads unpacked extensions with --load-extension.",
    "MCP servers expose tools, resources and prompts.",
    "Tantivy is a full-text search engine library written in Rust.",
    "HNSW graphs trade memory for fast approximate nearest neighbour search.",
    "",
    "a",
    "Emoji 🎉 and symbols ∑ survive tokenisation.",
    "Mixed: PostgreSQL 数据库 и база данных",
    "The last text of twenty.",
]


@pytest.fixture(scope="module")
def embedder() -> _core.Embedder:
    return embedding.load_embedder()


def reference_vectors(texts: list[str], model: Path | None = None) -> np.ndarray:
    """The model the core runs (or ``model``) through onnxruntime's Python API, pooled as
    sentence-transformers does."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    files = embedding.model_files()
    tok = Tokenizer.from_file(str(files.tokenizer))
    tok.enable_truncation(256)
    tok.no_padding()
    path = model if model is not None else embedding.runnable_model(files)[0]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = []
    for text in texts:
        enc = tok.encode(text)
        feed = {
            "input_ids": np.array([enc.ids], dtype=np.int64),
            "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
            "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
        }
        hidden = session.run(None, feed)[0][0]
        mask = feed["attention_mask"][0][:, None]
        pooled = (hidden * mask).sum(0) / mask.sum()
        out.append(pooled / np.linalg.norm(pooled))
    return np.array(out)


def test_core_vectors_match_onnxruntime_python_on_twenty_texts(embedder: _core.Embedder) -> None:
    ours = np.array(embedder.embed(TEXTS))
    ref = reference_vectors(TEXTS)
    assert ours.shape == (20, _core.DIM)
    cosines = (ours * ref).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)


def test_a_texts_vector_does_not_depend_on_the_texts_embedded_beside_it(
    embedder: _core.Embedder,
) -> None:
    """The integer model scales its activations per call, so the default embeds one text
    per call: a passage gets the same vector alone, in a batch, or beside a long text."""
    alone = np.array(embedder.embed(["how do I make a virtual environment"]))[0]
    long = "Virtual environments each have their own set of installed packages. " * 30
    beside = np.array(embedder.embed([long, "how do I make a virtual environment", long]))[1]
    assert float(alone @ beside) >= 0.99999


def test_the_packaged_model_runs_as_its_integer_derivation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The packaged model is derived once into the user's cache as integer matrix
    products (onnxruntime's quantiser); its vectors stay close to the packaged model's.
    A damaged derived file is derived again; when none can be made, the packaged model
    runs as it is."""
    import onnx

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    files = embedding.model_files()
    derived = embedding.derived_path(files)
    assert str(derived).startswith(str(tmp_path)) and not derived.exists()
    packaged = reference_vectors(TEXTS, files.model)

    vectors = np.array(embedding.load_embedder().embed(TEXTS))
    graph = onnx.load(str(derived)).graph
    weights = {init.name for init in graph.initializer}
    products = [node for node in graph.node if node.op_type in ("MatMul", "MatMulInteger")]
    # Every product with a weight matrix is an integer one (6 layers x 6); the attention's
    # products of two activations stay float.
    assert sum(node.op_type == "MatMulInteger" for node in products) == 36
    assert not [n.name for n in products if n.op_type == "MatMul" and weights & set(n.input)]
    assert derived.stat().st_size < 1.2 * files.model.stat().st_size
    worded = np.array([len(t.split()) >= 2 for t in TEXTS])
    cosines = (vectors * packaged).sum(axis=1)
    assert cosines[worded].min() >= 0.98 and cosines.mean() >= 0.985, cosines

    derived.write_bytes(b"\x00not an onnx graph" * 100)
    again = np.array(embedding.load_embedder().embed(TEXTS))
    assert derived.stat().st_size > 1_000_000
    assert (again * vectors).sum(axis=1).min() >= 0.9999

    (tmp_path / "no-cache").write_text("a file where the cache directory should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "no-cache"))
    with caplog.at_level("WARNING", logger="backtrail.indexer.embedding"):
        plain = np.array(embedding.load_embedder().embed(TEXTS))
    assert "running the packaged model as it is" in caplog.text
    assert (plain * packaged).sum(axis=1).min() >= 0.999


def test_long_texts_are_truncated_to_256_tokens(embedder: _core.Embedder) -> None:
    assert embedder.token_counts(["word " * 1000])[0] == 256
    assert embedder.max_tokens == 256


def fact(i: int, key: str, value: str, vector: list[float]) -> dict:
    return {"id": i, "kind": "fact", "title": key, "body": f"{key}: {value}", "vector": vector}


def test_screen_appearance_preference_finds_the_dark_mode_fact(
    tmp_path: Path, embedder: _core.Embedder
) -> None:
    facts = [
        ("user/theme", "dark mode"),
        ("deploy/region", "eu-west-1"),
        ("user/lang", "python"),
        ("db/pool_size", "20"),
        ("build/cache", "enabled"),
    ]
    texts = [f"{k}: {v}" for k, v in facts]
    index = _core.Index(str(tmp_path / "idx"), embedder=embedder)
    index.upsert([fact(i + 1, k, v, vec) for i, ((k, v), vec) in
                  enumerate(zip(facts, embedder.embed(texts), strict=True))])
    index.commit()
    for mode in ("vector", "hybrid"):
        hits = index.search("appearance preference for screens", 5, mode=mode)
        assert hits[0]["title"] == "user/theme", (mode, [h["title"] for h in hits])


def test_a_search_that_embeds_its_query_ranks_as_one_given_the_vector(
    tmp_path: Path, embedder: _core.Embedder
) -> None:
    # Given an embedder, the core embeds the query beside the BM25 retrieval and keeps
    # recent query vectors: the hits must be those of the same search given the vector.
    texts = [t for t in TEXTS if t.strip()]
    index = _core.Index(str(tmp_path / "idx"))
    index.upsert([{"id": i + 1, "kind": "page", "title": text[:30], "body": text,
                   "url": f"https://example.com/{i}", "vector": vector}
                  for i, (text, vector) in enumerate(zip(texts, embedder.embed(texts),
                                                         strict=True))])  # fmt: skip
    index.commit()
    queries = ["how do databases keep writes safe", "cooking pasta", texts[3][:40]]
    for query in queries * 2:  # the second round answers from the kept query vectors
        given = embedder.embed([query])[0]
        for mode in ("hybrid", "vector"):
            expected = index.search(query, 8, mode=mode, query_vector=given, now=1)
            got = index.search(query, 8, mode=mode, embedder=embedder, now=1)
            assert got == expected, (query, mode)
            assert got[0]["explanation"]["vector_similarity"] is not None
    assert index.search("", 8, mode="hybrid", embedder=embedder) == []
    with pytest.raises(_core.InvalidArgument, match="query vector"):
        index.search("", 8, mode="vector", embedder=embedder)


def test_non_latin_pages_are_found_by_a_word_from_each(tmp_path: Path) -> None:
    index = _core.Index(str(tmp_path / "idx"))
    index.upsert([
        {"id": 1, "kind": "page", "title": "数据库", "body": "关系型数据库使用结构化查询语言。"},
        {"id": 2, "kind": "page", "title": "БД", "body": "Реляционная база данных хранит таблицы."},
        {"id": 3, "kind": "page", "title": "ΒΔ", "body": "Η βάση δεδομένων αποθηκεύει πίνακες."},
    ])
    index.commit()
    assert [h["id"] for h in index.search("查询语言", mode="bm25")] == [1]
    assert [h["id"] for h in index.search("таблицы", mode="bm25")] == [2]
    assert [h["id"] for h in index.search("πίνακες", mode="bm25")] == [3]


def test_hybrid_search_without_an_embedder_still_answers_with_bm25(tmp_path: Path) -> None:
    index = _core.Index(str(tmp_path / "idx"))
    index.upsert([{"id": 5, "kind": "note", "body": "rotate the signing key"}])
    index.commit("w1")
    hits = index.search("signing key")
    assert [h["id"] for h in hits] == [5]
    assert hits[0]["explanation"]["vector_similarity"] is None
    assert "**signing**" in hits[0]["snippet"]
    with pytest.raises(_core.InvalidArgument, match="query vector"):
        index.search("signing key", mode="vector")


def test_missing_model_files_raise_model_error_and_corrupt_models_too(tmp_path: Path) -> None:
    files = embedding.model_files()
    with pytest.raises(_core.ModelError, match="not found"):
        _core.Embedder(str(files.ort_library), str(tmp_path / "nope.onnx"), str(files.tokenizer))
    garbage = tmp_path / "model.onnx"
    garbage.write_bytes(b"\x00not an onnx graph" * 100)
    with pytest.raises(_core.ModelError, match="sha256"):
        _core.Embedder(str(files.ort_library), str(garbage), str(files.tokenizer),
                       sha256=embedding.MODEL_SHA256)
    with pytest.raises(_core.ModelError, match="cannot load model"):
        _core.Embedder(str(files.ort_library), str(garbage), str(files.tokenizer))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(_core.ModelError):
        embedding.load_embedder(tmp_path)


def test_user_model_directory_replaces_the_packaged_files(tmp_path: Path) -> None:
    files = embedding.model_files()
    (tmp_path / "model.onnx").write_bytes(files.model.read_bytes())
    (tmp_path / "tokenizer.json").write_bytes(files.tokenizer.read_bytes())
    own = embedding.load_embedder(tmp_path)
    assert len(own.embed(["hello"])[0]) == _core.DIM


def test_every_core_exception_derives_from_core_error() -> None:
    for name in ("InvalidArgument", "LockTimeout", "IndexCorrupt", "ModelError", "CoreIOError"):
        assert issubclass(getattr(_core, name), _core.CoreError)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "page"}, "missing \"id\""),
        ({"id": 1}, "missing \"kind\""),
        ({"id": 1, "kind": "tab"}, "unknown kind"),
        ({"id": 0, "kind": "page"}, "out of range"),
        ({"id": -3, "kind": "page"}, "wrong type"),
        ({"id": 1, "kind": "page", "title": 7}, "wrong type"),
        ({"id": 1, "kind": "page", "body": "\ud800"}, "wrong type"),
        ({"id": 1, "kind": "page", "vector": [0.1] * 3}, "dimensions"),
        ({"id": 1, "kind": "page", "colour": "red"}, "unknown field"),
    ],
)
def test_bad_documents_raise_invalid_argument_and_stage_nothing(
    tmp_path: Path, doc: dict, message: str
) -> None:
    index = _core.Index(str(tmp_path / "idx"))
    with pytest.raises(_core.InvalidArgument, match=message):
        index.upsert([{"id": 9, "kind": "note", "body": "fine"}, doc])
    assert index.pending() == 0
    with pytest.raises(_core.InvalidArgument):
        index.upsert(["not a dict"])  # type: ignore[list-item]


def test_bad_search_arguments_raise_invalid_argument(tmp_path: Path) -> None:
    index = _core.Index(str(tmp_path / "idx"))
    with pytest.raises(_core.InvalidArgument, match="mode"):
        index.search("x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(_core.InvalidArgument, match="unknown search option"):
        index.search("x", options={"bm25_wieght": 1.0})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(_core.InvalidArgument, match="unknown kind"):
        index.search("x", kinds=["tab"])  # type: ignore[list-item]


def test_searches_run_in_parallel_threads_while_another_thread_commits(tmp_path: Path) -> None:
    index = _core.Index(str(tmp_path / "idx"))
    index.upsert([{"id": i, "kind": "passage", "body": f"shared term number {i}"}
                  for i in range(1, 200)])
    index.commit()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(50):
                assert index.search("shared term", 5, mode="bm25")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def writer() -> None:
        try:
            for i in range(200, 220):
                index.upsert([{"id": i, "kind": "passage", "body": f"shared term {i}"}])
                index.commit(str(i))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert index.watermark() == "219"
    assert index.stats()["documents"] == 219


def test_stats_report_documents_vectors_and_watermark(tmp_path: Path) -> None:
    index = _core.Index(str(tmp_path / "idx"), quantization="f16")
    index.upsert([{"id": 1, "kind": "note", "body": "x", "vector": [1.0] + [0.0] * 383}])
    index.commit("42")
    stats = index.stats()
    assert (stats["documents"], stats["documents_with_vectors"], stats["watermark"]) == (1, 1, "42")
    assert stats["disk_bytes"] > 0
    got = index.get(1)
    assert got is not None and got["vector"][0] == pytest.approx(1.0, abs=1e-3)
    assert index.get(2) is None


def test_a_model_file_that_holds_no_graph_is_a_model_error(tmp_path: Path) -> None:
    files = embedding.model_files()
    garbage = tmp_path / "model.onnx"
    garbage.write_bytes(b"\x08\x07" + b"\x12\x00")  # a protobuf ModelProto with no graph
    with pytest.raises(_core.ModelError):
        _core.Embedder(str(files.ort_library), str(garbage), str(files.tokenizer))


def _kept(cache: Path) -> tuple[Path, Path]:
    """The kept graph and the weights file beside it (there must be one of each)."""
    (graph,) = cache.glob("*-split.onnx")
    (weights,) = cache.glob("*.weights")
    return graph, weights


def test_the_optimised_graph_is_kept_and_reused_and_a_damaged_one_is_rebuilt(
    tmp_path: Path, embedder: _core.Embedder
) -> None:
    cache = tmp_path / "model-cache"
    texts = TEXTS[:6] + ["a much longer text " * 30]
    expected = np.array(embedder.embed(texts))  # loaded without a cache

    def same_vectors(loaded: _core.Embedder) -> bool:
        return bool((np.array(loaded.embed(texts)) * expected).sum(axis=1).min() > 0.9999)

    first = embedding.load_embedder(cache_dir=cache)
    graph, weights = _kept(cache)
    assert graph.name.endswith("-split.onnx")
    assert graph.stat().st_size < 1_000_000 < weights.stat().st_size  # the weights apart
    assert sorted(p.name for p in cache.iterdir()) == sorted([graph.name, weights.name])
    stamps = graph.stat().st_mtime_ns, weights.stat().st_mtime_ns
    second = embedding.load_embedder(cache_dir=cache)  # from the kept graph
    assert (graph.stat().st_mtime_ns, weights.stat().st_mtime_ns) == stamps
    if sys.platform == "linux":  # onnxruntime maps the weights instead of reading them
        assert str(weights) in Path("/proc/self/maps").read_text()
    assert same_vectors(first) and same_vectors(second)

    # Short weights (a disk that filled up, say): the graph cannot load and is rebuilt.
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    assert same_vectors(embedding.load_embedder(cache_dir=cache))
    graph, renewed = _kept(cache)
    assert renewed.name != weights.name and renewed.stat().st_size > 1_000_000

    # Missing weights: the same.
    renewed.unlink()
    assert same_vectors(embedding.load_embedder(cache_dir=cache))
    graph, weights = _kept(cache)

    # A damaged graph names no weights: it is rebuilt, and its weights are left while they
    # are young (a writer in another process could be about to publish them), then removed.
    graph.write_bytes(b"not an onnx graph")
    assert same_vectors(embedding.load_embedder(cache_dir=cache))
    assert graph.stat().st_size > 1_000, "the damaged graph was written again"
    stray = weights
    assert stray.exists() and len(list(cache.glob("*.weights"))) == 2
    os.utime(stray, (0, 0))
    assert same_vectors(embedding.load_embedder(cache_dir=cache))
    assert not stray.exists()
    graph, weights = _kept(cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([graph.name, weights.name])

    # A graph kept by an earlier Backtrail (weights inline) is replaced once a new one is.
    (cache / graph.name.replace("-split.onnx", ".onnx")).write_bytes(b"one-file graph")
    embedding.load_embedder(cache_dir=cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([graph.name, weights.name])


def test_a_kept_graph_is_never_used_for_a_model_file_replaced_since(tmp_path: Path) -> None:
    """The kept graph is found by the model file's identity: a model replaced since (here
    a damaged copy) is read and checked again, and a new model's graph takes the old
    one's place."""
    files = embedding.model_files()
    model, cache = tmp_path / "model.onnx", tmp_path / "model-cache"
    model.write_bytes(files.model.read_bytes())

    def load() -> _core.Embedder:
        return _core.Embedder(str(files.ort_library), str(model), str(files.tokenizer),
                              sha256=files.sha256, cache_dir=str(cache))  # fmt: skip

    assert load().embed(["hello"])
    kept, _ = _kept(cache)
    data = bytearray(files.model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))  # same size; a file time of its own, whatever the clock
    os.utime(model, ns=(2_000_000_000, 2_000_000_000))
    with pytest.raises(_core.ModelError, match="sha256"):
        load()
    model.write_bytes(files.model.read_bytes())  # the right bytes again
    os.utime(model, ns=(1_000_000_000, 1_000_000_000))
    assert load().embed(["hello"])
    renewed, _ = _kept(cache)  # the old model's graph and weights are gone
    assert renewed.name != kept.name
