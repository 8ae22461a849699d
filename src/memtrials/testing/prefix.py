"""A provider's prefix cache, played by the loopback server (``LoopbackServer(prefix_cache=N)``)
and measured by ``benchmarks/bench_scale.py``: the longest prefix two prompts share, and how many
of the loopback's tokens (whitespace words) of it are whole."""

from __future__ import annotations


def common_prefix(a: str, b: str, chunk: int = 1024) -> int:
    """Length of the longest common prefix of ``a`` and ``b``: chunks compared whole (in C),
    then the characters of the first chunk that differs."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i:i + chunk] == b[i:i + chunk]:
        i += chunk
    if i >= n:
        return n
    end = min(n, i + chunk)
    while i < end and a[i] == b[i]:
        i += 1
    return i


def whole_words(prompt: str, shared: int) -> int:
    """The loopback's tokens (whitespace words) of ``prompt[:shared]`` that are whole: a word cut
    in two is not served from a prefix cache."""
    head = prompt[:shared]
    words = len(head.split())
    if head and shared < len(prompt) and not head[-1].isspace() and not prompt[shared].isspace():
        words -= 1
    return max(0, words)
