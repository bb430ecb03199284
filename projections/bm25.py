"""Plain Okapi BM25 over an in-memory list of texts (k1 = 1.2, b = 0.75, lowercase words).

Two uses: the last-resort search when the cold table cannot be read (``query_memory`` then scans
the log itself), and the plain baseline that benchmarks compare the cold tier with. No stemming
and no stop words, on purpose: it is the simplest honest lexical ranker.
"""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lowercase word tokens of ``text``."""
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 over a fixed list of texts (the log-scan fallback of query_memory)."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(words(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg_length = (sum(self.lengths) / len(self.lengths)) if self.docs else 0.0
        frequency: Counter[str] = Counter()
        for doc in self.docs:
            frequency.update(doc.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in frequency.items()}
        self.postings: dict[str, list[int]] = {}
        for index, doc in enumerate(self.docs):
            for word in doc:
                self.postings.setdefault(word, []).append(index)

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        """Indices of the best ``k`` texts with their scores, best first (ties by index)."""
        scores: dict[int, float] = {}
        for word in set(words(query)):
            idf = self.idf.get(word)
            if idf is None:
                continue
            for index in self.postings[word]:
                tf = self.docs[index][word]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[index] / self.avg_length)
                scores[index] = scores.get(index, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
