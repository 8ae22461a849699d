"""WebShop's search engine: Lucene 9.5 BM25 as Anserini runs it, replicated exactly in numpy.

Upstream searches a pyserini (Anserini/Lucene) index of the catalog with BM25 (k1 = 0.9,
b = 0.4) and shows the top 50, ten per page.  **Choice: an exact replica of Lucene's BM25, not
bm25s.**  What an agent sees on page 1 is the order of the top ten, and a BM25 that computes
with exact document lengths reorders near-ties: the data's README measured bm25s 0.3.16
(``method='lucene'``) fed Lucene's own tokens at top-1 0.981 and overlap@10 0.987 on the 6,900
instruction queries but the same ten in the same order for only 46 %, while this replica
reproduces all 9,218 recorded top-50 lists (ASINs and scores; ``tests/envs/webshop/test_search.py``).
The replica is ~100 lines of numpy and needs no extra dependency.  What it reproduces:

* documents: Lucene's analyzed tokens of every product (``data/webshop/doc_tokens.jsonl.xz``,
  recorded from the index), so the document side is Lucene's own;
* length norms: the document's token count quantised to one byte (``SmallFloat.intToByte4``)
  and decoded (``byte4ToInt``), as Lucene stores it; ``avgdl`` = total tokens / documents;
* scores in float32 as Lucene computes them: ``idf = ln(1 + (N - df + 0.5)/(df + 0.5))``,
  ``w = boost * idf``, ``w - w / (1 + tf * inv)`` with ``inv = 1/(k1 ((1 - b) + b L/avgdl))``;
  a query is a bag of words, each distinct term a clause boosted by its count; clause scores
  are summed in double and cast to float;
* order: score descending, ties by ASIN ascending (Anserini sorts on the id field);
  :meth:`SearchEngine.search_scored` also gives the scores Anserini returns (its
  ScoreTiesAdjusterReranker: ``score * 1e4`` rounded half up in double, divided by ``1e4f``;
  within a run of hits at most 1e-4 apart the j-th gets ``1e-6 * j`` subtracted).

The query analyzer approximates Anserini's ``DefaultEnglishAnalyzer`` (Lucene
``StandardTokenizer``, English possessive filter, lower case, Lucene's 33 English stop words,
``PorterStemFilter``): words are the Unicode UAX #29 word segments of the ``regex`` library that
hold a letter, digit or pictographic symbol (Lucene emits Unicode 9's pictographs as tokens);
stemming is NLTK's Porter stemmer in ``MARTIN_EXTENSIONS`` mode, which implements the same
departures from the 1980 paper as Lucene's ``PorterStemmer`` (no stemming of words of up to two
letters; ``bli`` -> ``ble``, ``logi`` -> ``log``).  PyStemmer's ``porter`` (Snowball's) lacks
them and gave different tokens for 74 of the 9,218 recorded queries (``technology`` ->
``technologi``, ``us`` -> ``u``); NLTK's gives Lucene's tokens for all 9,218.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from memtrials.envs.webshop import data

K1 = 0.9
B = 0.4
SEARCH_RETURN_N = 50
#: Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split())
#: Pictographs Lucene's StandardTokenizer (Unicode 9 emoji data) emits as tokens that today's
#: ``Extended_Pictographic`` no longer lists (e.g. ★ ♡ ☛ ❥).
_OLD_PICTOGRAPHS = ("\u2600-\u2605\u2607-\u2612\u2614-\u2685\u2690-\u2705\u2708-\u2712\u2714\u2716\u271d"
                    "\u2721\u2728\u2733\u2734\u2744\u2747\u274c\u274e\u2753-\u2755\u2757\u2763-\u2767"
                    "\u2795-\u2797\u27a1\u27b0\u27bf")
_POSSESSIVE = ("'s", "'S", "\u2019s", "\u2019S", "\uff07s", "\uff07S")


@functools.lru_cache(maxsize=1)
def _patterns():
    import regex

    return (regex.compile(r"(?w)\b"),
            regex.compile(rf"[\p{{L}}\p{{Nd}}\p{{Extended_Pictographic}}{_OLD_PICTOGRAPHS}]"),
            regex.compile(r"[\p{Lm}\p{Sm}\p{P}]+"))


@functools.lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter stem of one lowercased word, as Lucene's ``PorterStemFilter`` gives it."""
    return _stemmer().stem(word, to_lowercase=False)


def words(text: str) -> list[str]:
    """The tokenizer: UAX #29 word segments that Lucene's ``StandardTokenizer`` would emit."""
    boundary, keep, drop = _patterns()
    return [s for s in boundary.split(text) if keep.search(s) and not drop.fullmatch(s)]


def analyze(text: str) -> list[str]:
    """Query tokens: words, possessive ``'s`` removed, lower case, stop words out, Porter stems."""
    out = []
    for w in words(text):
        if w.endswith(_POSSESSIVE):
            w = w[:-2]
        w = w.lower()
        if w and w not in STOP_WORDS:
            out.append(stem(w))
    return out


def _int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _from_int4(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_FREE = 255 - _int4(2**31 - 1)  # 24: byte values that store lengths exactly


def length_norm(length: int) -> int:
    """A document length as Lucene keeps it: ``byte4ToInt(intToByte4(length))``."""
    if length < _FREE:
        return length
    return _FREE + _from_int4(_int4(length - _FREE))


def anserini_scores(scores: Iterable[float]) -> list[float]:
    """Scores as Anserini returns them (ScoreTiesAdjusterReranker, float32 arithmetic)."""
    f32, out = np.float32, []
    for s in scores:
        v = f32(np.floor(float(f32(s)) * 1e4 + 0.5)) / f32(1e4)
        if out and not out[-1] - v > f32(1e-4):
            dup += 1
            v = v - f32(1e-6) * f32(dup)
        else:
            dup = 0
        out.append(f32(v))
    return [float(v) for v in out]


class SearchEngine:
    """BM25 over the catalog's Lucene document tokens; :meth:`search` gives ASINs ranked."""

    def __init__(self, doc_ids: Sequence[str], doc_tokens: Sequence[Sequence[str]], k1: float = K1, b: float = B):
        if len(doc_ids) != len(doc_tokens) or not doc_ids:
            raise ValueError("SearchEngine needs one token list per document and at least one document")
        f32 = np.float32
        self.doc_ids = tuple(doc_ids)
        n = len(doc_ids)
        lengths = np.array([len(t) for t in doc_tokens], dtype=np.int64)
        avgdl = f32(float(lengths.sum()) / n)
        norms = np.array([length_norm(int(x)) for x in lengths], dtype=f32)
        self._inv = (f32(1) / (f32(k1) * ((f32(1) - f32(b)) + f32(b) * norms / avgdl))).astype(f32)
        postings: dict[str, dict[int, int]] = {}
        for d, toks in enumerate(doc_tokens):
            for term, tf in Counter(toks).items():
                postings.setdefault(term, {})[d] = tf
        self._terms = {term: i for i, term in enumerate(postings)}
        self._docs = [np.fromiter(p.keys(), dtype=np.int64, count=len(p)) for p in postings.values()]
        self._tfs = [np.fromiter(p.values(), dtype=f32, count=len(p)) for p in postings.values()]
        df = np.array([len(p) for p in postings.values()], dtype=np.float64)
        self._idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(f32)
        order = sorted(range(n), key=lambda i: self.doc_ids[i])
        self._id_rank = np.empty(n, dtype=np.int64)
        self._id_rank[order] = np.arange(n)

    @classmethod
    def from_data(cls, root: str | Path | None = None) -> "SearchEngine":
        """The engine over the shipped document tokens (``data/webshop/doc_tokens.jsonl.xz``)."""
        ids, toks = [], []
        for rec in data.read_jsonl(data.DOC_TOKENS_FILE, root):
            ids.append(rec["id"])
            toks.append(rec["tokens"])
        return cls(ids, toks)

    def _scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        f32 = np.float32
        total = np.zeros(len(self.doc_ids), dtype=np.float64)
        hit = np.zeros(len(self.doc_ids), dtype=bool)
        for term, count in Counter(analyze(query)).items():
            t = self._terms.get(term)
            if t is None:
                continue
            w = f32(count) * self._idf[t]
            docs = self._docs[t]
            total[docs] += w - w / (f32(1) + self._tfs[t] * self._inv[docs])
            hit[docs] = True
        idx = np.flatnonzero(hit)
        return idx, total[idx].astype(f32)

    def search_scored(self, query: str, k: int = SEARCH_RETURN_N) -> list[tuple[str, float]]:
        """Top ``k`` as ``(asin, Lucene score)``: score descending, ties by ASIN."""
        idx, scores = self._scores(query)
        order = np.lexsort((self._id_rank[idx], -scores))[:k]
        return [(self.doc_ids[idx[i]], float(scores[i])) for i in order]

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The ASINs of the top ``k`` hits of ``query``, ranked as the results pages show them."""
        return [asin for asin, _ in self.search_scored(query, k)]


@functools.lru_cache(maxsize=4)
def _engine(folder: Path) -> SearchEngine:
    return SearchEngine.from_data(folder)


def load_search_engine(root: str | Path | None = None) -> SearchEngine:
    """The engine of the data folder (default ``data/webshop/``), built once per process."""
    return _engine(data.data_root(root))
