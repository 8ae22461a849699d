"""Coined tool names for the luck worlds (*Lessons from Luck*, section 3.1).

A coined name is a pronounceable non-word built from syllables; it is accepted only if
it is not in an English word list (``english-words``: web2 and GCIDE, lower-cased
alphabetic entries) and it neither occurs in nor contains a word of the domain's texts.
"""

from __future__ import annotations

import functools
import re

import numpy as np

_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "dr", "gr", "kr", "tr", "st", "th", "sh", "")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o")
_MIDDLES = ("l", "n", "r", "v", "d", "m", "s", "lv", "nd", "rr", "ld", "st", "nr", "sk", "rv")
_ENDINGS = ("o", "a", "in", "an", "er", "el", "ic", "ar", "en", "is", "on", "ry", "ley", "ore",
            "ick", "ell")


@functools.lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    """The word list names are checked against (lower-case, alphabetic)."""
    try:
        from english_words import get_english_words_set
    except ImportError as exc:  # pragma: no cover - environment error
        raise RuntimeError(
            "the luck study's world generator needs the word list package 'english-words' "
            "(pip install -r envs/requirements.txt)"
        ) from exc
    return frozenset(get_english_words_set(["web2", "gcide"], lower=True, alpha=True))


def _text_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3}


def name_conflicts(name: str, domain_text: str) -> str | None:
    """Why ``name`` is not acceptable as a coined name in a domain, or ``None``."""
    if name in english_words():
        return "an English word"
    words = _text_words(domain_text)
    if name in words or any(name in w for w in words):
        return "occurs in the domain's texts"
    if any(len(w) >= 4 and w in name for w in words):
        return "contains a word of the domain's texts"
    return None


def coin_name(rng: np.random.Generator, domain_text: str, taken: set[str],
              avoid_initial: str | None = None, max_tries: int = 10_000) -> str:
    """Draw a fresh coined name (5-8 letters) that passes :func:`name_conflicts`."""
    for _ in range(max_tries):
        parts = [
            _ONSETS[rng.integers(len(_ONSETS))],
            _VOWELS[rng.integers(len(_VOWELS))],
            _MIDDLES[rng.integers(len(_MIDDLES))],
            _ENDINGS[rng.integers(len(_ENDINGS))],
        ]
        name = "".join(parts)
        if not 5 <= len(name) <= 8 or name in taken:
            continue
        if avoid_initial is not None and name[0] == avoid_initial:
            continue
        if name_conflicts(name, domain_text) is None:
            return name
    raise RuntimeError("could not coin a tool name; the syllable inventory is exhausted")
