"""Type stub for ``backtrail._core``, the Rust search core (see rust_core/).

One index directory holds Tantivy segments (BM25), immutable usearch vector
segments and a manifest carried in Tantivy's commit payload. Many processes may
open the same directory; writes are buffered in the ``Index`` object and applied
under a cross-process lock by ``commit``. Every long call releases the GIL.
"""

from collections.abc import Sequence
from typing import Literal, TypedDict, final

__all__ = [
    "CoreError", "CoreIOError", "DIM", "Embedder", "Index", "IndexCorrupt", "InvalidArgument",
    "KINDS", "LockTimeout", "MAX_ID", "ModelError", "__version__",
]

__version__: str

#: Embedding dimension of all-MiniLM-L6-v2.
DIM: int
#: Largest document id the core accepts (ids are stable u64 values below 2**63).
MAX_ID: int
#: Document kinds the core knows.
KINDS: list[str]

class CoreError(Exception):
    """Root of every error raised by the core."""

class InvalidArgument(CoreError):
    """A document, filter or option the core cannot accept (wrong kind, bad id, ...)."""

class LockTimeout(CoreError):
    """The cross-process write lock was not acquired within the timeout."""

class IndexCorrupt(CoreError):
    """The index directory cannot be read (damaged or foreign files)."""

class ModelError(CoreError):
    """The embedding model, tokenizer or onnxruntime library is missing or unusable."""

class CoreIOError(CoreError):
    """An operating-system error while reading or writing the index."""

Kind = Literal["page", "passage", "highlight", "note", "bookmark", "fact"]
Mode = Literal["bm25", "vector", "hybrid"]

class Document(TypedDict, total=False):
    id: int  # required; stable, 0 < id <= MAX_ID
    kind: Kind  # required
    url: str
    domain: str  # host name; filters match it and its parent domains
    title: str
    body: str
    # The headings the text sits under on its page, outermost first ("Options › Notes"):
    # searched as a field of its own (section_boost); empty when none.
    section: str
    parent: int  # the page a passage belongs to (grouping key); defaults to id
    first_seen: int  # unix seconds
    last_seen: int  # unix seconds
    visits: int
    # BCP 47 tag ("de", "pt-br"), empty if unknown: Latin-script words of the title and
    # body are stemmed in this language (English when it has no stemmer).
    language: str
    # 384 floats. Omitted: keep the stored vector when title and body are
    # unchanged, else the document has no vector until one is upserted.
    vector: Sequence[float]

class Explanation(TypedDict):
    bm25_rank: int | None  # 1-based rank in the BM25 candidate list
    bm25_score: float | None
    vector_rank: int | None
    vector_similarity: float | None  # cosine similarity
    coverage: float  # share of the query's words (idf-weighted) the best BM25 document holds
    bm25_weight: float  # the BM25 weight this search used
    fusion: float  # fused relevance before time decay and visit boost
    duplicate_of: int | None  # the more relevant near-duplicate whose fusion it shares
    decay: float  # multiplier from the age of last_seen
    visit_boost: float  # multiplier from the visit count
    score: float  # final score = fusion * decay * visit_boost

class Passage(TypedDict):
    id: int
    snippet: str
    score: float

class Hit(TypedDict):
    id: int
    kind: str
    url: str
    domain: str
    title: str
    parent: int
    first_seen: int
    last_seen: int
    visits: int
    language: str
    score: float
    snippet: str  # matched terms wrapped in the markers given to search()
    explanation: Explanation
    passages: list[Passage]  # best passages of the same parent, best first

class SearchOptions(TypedDict, total=False):
    bm25_candidates: int  # default 50, at least k, in every mode: one ranking for any k up to it
    vector_candidates: int  # default 50, at least k, in every mode
    fusion: Literal["zscore", "convex", "rrf"]  # default "zscore"
    # Weight of BM25 in the fusion (vector gets 1 - w), default 0.1; with coverage_weighting
    # (default True) it rises to 1 as the best BM25 match holds more of the query's words
    # (each word weighted by its inverse document frequency).
    bm25_weight: float
    coverage_weighting: bool
    coverage_depth: int  # top BM25 documents read for the coverage (the best counts), default 2
    vector_z_clip: float  # zscore fusion: clip the similarity's z to +-this (0, default: off)
    rrf_k: float  # default 60
    title_boost: float  # BM25 weight of the title field relative to body
    section_boost: float  # BM25 weight of the section field relative to body
    # Leave stop words ("how do I", "what is the") out of scoring (default True); they
    # are never highlighted in snippets either way.
    drop_stop_words: bool
    proximity_boost: float  # bonus for bodies holding the words in order, close (default 2)
    common_word_share: float  # words in more docs than this share rank the others' best (0.2)
    decay_half_life_days: float  # 0 disables time decay
    decay_floor: float  # decay never goes below this multiplier
    visit_weight: float  # boost = 1 + visit_weight * ln(1 + visits)
    # Near-duplicates (vector cosine >= this) of a more relevant candidate share its fusion
    # score, so recency and visits pick among copies of one text (0, default: off).
    duplicate_similarity: float
    group: bool  # one hit per parent (page-level aggregation), default True
    passages_per_hit: int  # default 3
    expansion: int  # HNSW expansion at search time
    snippet_chars: int  # default 200
    markers: tuple[str, str]  # default ("**", "**")

@final
class Embedder:
    """all-MiniLM-L6-v2 (ONNX) through onnxruntime, tokenised by `tokenizers`."""

    @property
    def dim(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def query_counts(self) -> tuple[int, int]:
        """(queries embedded by searches, queries answered from the 256 latest query
        vectors)."""
    def __new__(
        cls,
        ort_library: str,
        model_path: str,
        tokenizer_path: str,
        *,
        sha256: str | None = None,
        threads: int = 0,
        sessions: int = 1,
        max_tokens: int = 256,
        batch_size: int = 16,
        cache_dir: str | None = None,
    ) -> Embedder:
        """`cache_dir`: where onnxruntime's optimised graph of the model is kept, so
        later loads take about half the time (rebuilt when unreadable)."""
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text, in input order."""
    def token_counts(self, texts: Sequence[str]) -> list[int]: ...

@final
class Index:
    """One index directory, shared by many processes."""

    @property
    def path(self) -> str: ...
    def __new__(
        cls,
        path: str,
        *,
        embedder: Embedder | None = None,
        lock_timeout: float = 30.0,
        quantization: Literal["i8", "f16", "f32"] | None = None,
        connectivity: int | None = None,
        expansion_add: int | None = None,
        expansion_search: int | None = None,
    ) -> Index: ...
    def upsert(self, docs: Sequence[Document]) -> None:
        """Stage documents (replacing any with the same id) until commit()."""
    def touch(self, updates: Sequence[tuple[int, int, int]]) -> None:
        """Stage `(parent, last_seen, visits)` updates of every document of each parent,
        keeping text and vectors; touches apply before the other operations of their batch."""
    def delete_ids(self, ids: Sequence[int]) -> None: ...
    def delete_parents(self, ids: Sequence[int]) -> None:
        """Stage deletion of every document whose parent is one of `ids`."""
    def delete_url(self, url: str) -> None: ...
    def delete_domain(self, domain: str) -> None:
        """Stage deletion of the domain and its subdomains."""
    def delete_range(self, since: int | None, until: int | None) -> None:
        """Stage deletion of documents whose last_seen is in [since, until)."""
    def delete_all(self) -> None: ...
    def clear_vectors(self) -> None:
        """Stage dropping every vector, keeping the documents and their text (each has no
        vector until one is upserted again); applies before the other operations of its
        batch, so vectors upserted in the same batch are kept."""
    def pending(self) -> int:
        """Number of staged operations."""
    def commit(self, watermark: str | None = None) -> int:
        """Apply staged operations atomically under the write lock; returns the opstamp."""
    def rollback(self) -> None:
        """Drop staged operations."""
    def watermark(self) -> str | None:
        """The watermark of the latest commit any process made."""
    def reload(self) -> None: ...
    def get(self, id: int) -> Document | None: ...
    def search(
        self,
        query: str,
        k: int = 10,
        *,
        kinds: Sequence[str] | None = None,
        domains: Sequence[str] | None = None,
        since: int | None = None,
        until: int | None = None,
        now: int | None = None,
        mode: Mode = "hybrid",
        query_vector: Sequence[float] | None = None,
        embedder: Embedder | None = None,
        options: SearchOptions | None = None,
    ) -> list[Hit]:
        """Vector and hybrid modes use `query_vector`, else embed the query with `embedder`
        (else the index's own), keeping the 256 latest query vectors; in hybrid mode the
        embedding and graph search run beside the BM25 retrieval, then their thread takes a
        share of its remaining segments."""
    def similar(self, id: int, k: int = 10, *, exclude_parent: bool = True) -> list[Hit]:
        """Nearest documents to the stored vector of `id`."""
    def compact(self) -> None:
        """Merge all segments, dropping deleted documents and dead vectors from disk."""
    def needs_vector_merge(self) -> bool:
        """True when the latest commit has more vector segments than searches should visit
        (two), or segments mostly of superseded vectors."""
    def merge_vectors(self) -> bool:
        """Insert the smaller vector segments into the next largest graph (into the
        largest once they hold an eighth as many vectors), or rebuild a segment of mostly
        superseded vectors, without the write lock (commits go on meanwhile), taking it
        only to publish. False when
        there was nothing to merge, another process is merging, or a commit meanwhile
        dropped a chosen segment."""
    def stop_merging(self) -> None:
        """Stop merging through this handle (shutting down): a running `merge_vectors`
        gives up soon, publishing nothing, and later calls return False at once."""
    def documents(self) -> int:
        """Live documents in the latest commit (cheap: `stats` without its walks)."""
    def stats(self) -> dict[str, int | str | None]: ...
