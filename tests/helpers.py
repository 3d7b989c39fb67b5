"""Helpers shared by the indexer, service and acceptance tests (fixtures are imported
from here by the test modules that use them)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from backtrail import _core
from backtrail.config import Config
from backtrail.indexer import embedding
from backtrail.service import base as memory_module

T = TypeVar("T")


def make_config(home: Path, **overrides: Any) -> Config:
    """Settings for a test: defaults, no environment, embeddings off unless asked for,
    no background thread unless asked for."""
    settings: dict[str, Any] = {"embeddings": False, "background_indexing": False}
    settings.update(overrides)
    return Config.load(home, overrides=settings, environ={})


def wait_for(condition: Callable[[], T], timeout: float = 60.0, what: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class CountingEmbedder:
    """Wraps the real embedder and counts the texts it embedded."""

    def __init__(self, inner: _core.Embedder) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@functools.cache
def cached_model() -> embedding.Model:
    """The embedding model, loaded once per test session."""
    return embedding.load_model()


def cached_embedder() -> _core.Embedder:
    """The embedder of :func:`cached_model`."""
    embedder = cached_model().embedder
    assert isinstance(embedder, _core.Embedder)
    return embedder


def as_model(embedder: embedding.TextEmbedder) -> embedding.Model:
    """``embedder`` (e.g. a :class:`CountingEmbedder` around :func:`cached_embedder`) as
    the model it runs, for an ``Indexer``."""
    return dataclasses.replace(cached_model(), embedder=embedder)


def share_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make Memory objects use :func:`cached_model` instead of loading their own."""
    model = cached_model()
    monkeypatch.setattr(memory_module, "load_model", lambda *args, **kwargs: model)


def index_files_containing(index_dir: Path, word: str) -> list[str]:
    """Files under the index directory whose bytes contain ``word`` (UTF-8)."""
    needle = word.encode("utf-8")
    return sorted(
        str(path.relative_to(index_dir))
        for path in index_dir.rglob("*")
        if path.is_file() and needle in path.read_bytes()
    )


LOREM = (
    "Write-ahead logging keeps the database consistent after a crash. "
    "Each transaction appends its changes to the log before the data pages change. "
    "Checkpoints copy the log back into the main file and let it restart."
)
