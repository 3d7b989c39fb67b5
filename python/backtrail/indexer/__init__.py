"""The indexer (layer 3): keeps the Rust core's search index derived from the ledger.

The ledger is the truth; the index is rebuilt from it at any time. This package turns
ledger entities into core documents (:mod:`.documents`, with stable ids from
:mod:`.ids`), extracts main text from captured HTML (:mod:`.extract`), loads the
embedding model (:mod:`.embedding`) and runs the indexing passes (:mod:`.passes`) under
the cross-process locks of :mod:`.locks`. Only the service layer above it calls in.
"""

from backtrail.errors import IndexBusy, IndexFailure
from backtrail.indexer.documents import (
    Document,
    chunk_text,
    embedding_text,
    item_document,
    page_documents,
)
from backtrail.indexer.embedding import Model, TextEmbedder
from backtrail.indexer.ids import (
    ENTITY_TYPES,
    MAX_ENTITY_ID,
    MAX_PASSAGES,
    TYPE_BOOKMARK,
    TYPE_FACT,
    TYPE_HIGHLIGHT,
    TYPE_NOTE,
    TYPE_PAGE,
    TYPE_PASSAGE,
    DocRef,
    doc_id,
    entity_doc_id,
    page_parent,
    parse_doc_id,
)
from backtrail.indexer.locks import HostPresence, PassLock, lower_thread_priority
from backtrail.indexer.passes import Indexer, Progress
from backtrail.indexer.reads import EntityReader, IndexLag, VectorModel, Watermark

__all__ = [
    "TYPE_PAGE", "TYPE_PASSAGE", "TYPE_HIGHLIGHT", "TYPE_NOTE", "TYPE_BOOKMARK", "TYPE_FACT",
    "ENTITY_TYPES", "MAX_ENTITY_ID", "MAX_PASSAGES", "DocRef", "doc_id", "parse_doc_id",
    "page_parent", "entity_doc_id", "Document", "chunk_text", "page_documents",
    "item_document", "embedding_text", "EntityReader", "Watermark", "IndexLag", "IndexBusy",
    "IndexFailure", "Indexer", "Progress", "TextEmbedder", "Model", "VectorModel",
    "HostPresence", "PassLock", "lower_thread_priority",
]  # fmt: skip
