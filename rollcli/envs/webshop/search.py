"""BM25 product search (`bm25s`), standing in for WebShop's Lucene/pyserini index.

Each product's `search_text()` (title, query, category path, bullet points, description,
attributes) is tokenised by `tokenize`: lower-case alphanumeric runs, English stop words
dropped, and a light plural-stripping stemmer (Lucene's English analyser stems too). Results
are ordered by score, ties broken by catalogue order, so a query always gives the same list.

Example:
    >>> from rollcli.envs.webshop.catalog import Product
    >>> engine = SearchEngine([Product("A", "Red Running Shoes"), Product("B", "Blue Shoe Rack"),
    ...                        Product("C", "Red Apple")])
    >>> engine.search("running shoe")
    ['A', 'B']
    >>> engine.search("zebra")
    []
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import bm25s
import numpy as np

from rollcli.envs.webshop.catalog import Product

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    """a an and are as at be but by for from has have i i'm if in into is it its me my need
    of on or our so some than that the their them then there these they this to want was we
    were what when which while who will with would you your looking find like buy""".split()  # noqa: SIM905
)


def stem(word: str) -> str:
    """Strip common English plural endings.

    >>> [stem(w) for w in ("shoes", "boxes", "berries", "glass", "oils", "jeans")]
    ['shoe', 'box', 'berry', 'glass', 'oil', 'jean']
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("xes", "ches", "shes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """
    >>> tokenize("I need Essential Oils, 2 fl oz!")
    ['essential', 'oil', '2', 'fl', 'oz']
    """
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class SearchEngine:
    """A BM25 index over a fixed list of products."""

    def __init__(self, products: Sequence[Product]) -> None:
        self.asins = [p.asin for p in products]
        self._bm25 = bm25s.BM25()
        corpus = [tokenize(p.search_text()) or ["<empty>"] for p in products]
        self._bm25.index(corpus, show_progress=False)
        self._vocab = self._bm25.vocab_dict

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every product for `query` (zeros when no query word is indexed)."""
        tokens = [t for t in tokenize(query) if t in self._vocab]
        if not tokens:
            return np.zeros(len(self.asins), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)

    def search(self, query: str, k: int = 50) -> list[str]:
        """The ASINs of the top `k` products with a positive score, best first."""
        scores = self.scores(query)
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [self.asins[i] for i in order[:k] if scores[i] > 0]
