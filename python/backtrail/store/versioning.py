"""When is a re-captured page a new version?

- ``content_hash`` is the SHA-256 of the *normalised* text (Unicode NFKC, case-folded,
  whitespace collapsed): captures that differ only in whitespace or case hash the same
  and count as unchanged.
- Otherwise :func:`similarity` compares the texts as multisets of word 3-shingles with
  every run of digits masked, so changed dates, times, counters and prices barely
  register, and repetitive pages (lists, tables) are weighed by how often each
  shingle occurs.
  At or above the threshold (``Limits.version_similarity``, default 0.9) the current
  version is updated in place; below it a new version is kept. With 3-shingles, 0.9
  means roughly "fewer than 2-3 % of the words changed".
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter

__all__ = ["normalize", "content_hash", "similarity"]

_WORDS = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")
_SHINGLE = 3


def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed to single spaces, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_hash(text: str) -> str:
    """Hex SHA-256 of :func:`normalize` ``(text)``."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def _shingles(text: str) -> Counter[tuple[str, ...]]:
    words = _WORDS.findall(_DIGITS.sub("0", normalize(text)))
    if len(words) < _SHINGLE:
        return Counter([tuple(words)] if words else [])
    return Counter(tuple(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1))


def similarity(old: str, new: str) -> float:
    """Weighted Jaccard similarity in [0, 1] of the digit-masked word 3-shingle
    multisets of two texts."""
    a, b = _shingles(old), _shingles(new)
    union = sum((a | b).values())
    if union == 0:
        return 1.0
    return sum((a & b).values()) / union
