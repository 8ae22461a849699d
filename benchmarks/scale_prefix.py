"""Prompt-prefix reuse of a bench_scale job's actor prompts (issue 39):
as sent, in the two other layouts of ``bench_prefix_share.py --layouts``, and as the loopback's
played prefix cache reported it (the records' ``cached_tokens``); and the content bound: the most
that any layout keeping the paper's content (every admissible action listed at every step, not
replayed in the history) could repeat (:func:`content_bound`)."""

from __future__ import annotations

from pathlib import Path


def repeated_share(order, texts: dict[str, str]) -> float:
    """Share of the prompts' words (the loopback's tokens) that repeat the previous prompt's prefix:
    the same episode's previous step, an episode's first prompt against the one sent before it."""
    from memtrials.testing.prefix import common_prefix, whole_words

    total = repeated = 0
    prev_by_ep: dict[str, str] = {}
    last_sent = ""
    for row in order.itertuples():
        text = texts[row.call_id]
        prev = prev_by_ep.get(row.episode_id, last_sent)
        total += len(text.split())
        repeated += whole_words(text, common_prefix(prev, text))
        prev_by_ep[row.episode_id] = last_sent = text
    return repeated / max(1, total)


def content_bound(order, texts: dict[str, str]) -> float | None:
    """The most of the prompts' words that *any* layout keeping the paper's content could repeat
    from the previous prompt's prefix: at every step after an episode's first, the words of the
    action just taken, of the current observation and of the listing of admissible actions are new
    (the listing is not replayed in the history: Appendix F), so at best every other word repeats.
    An episode's first prompt counts as sent.  ``None`` if a prompt's tail cannot be read.  A bound
    for a history that only grows (not Recent-3-Only's window, see :func:`prefix_reuse`)."""
    from bench_prefix_share import _TAIL
    from memtrials.testing.prefix import common_prefix, whole_words

    total = best = 0
    last_action: dict[str, str] = {}
    last_sent = ""
    for row in order.itertuples():
        text = texts[row.call_id]
        words = len(text.split())
        total += words
        if row.episode_id not in last_action:
            best += whole_words(text, common_prefix(last_sent, text))
        else:
            m = _TAIL.search(text)
            if m is None:
                return None
            new = len(m.group(4).split()) + len((m.group(5) or "").split()) + len(last_action[row.episode_id].split())
            best += max(0, words - new)
        last_action[row.episode_id] = str(row.action or "")
        last_sent = text
    return best / max(1, total)


def prefix_reuse(calls, steps, condition: str) -> dict:
    """Prefix reuse of a cell's actor prompts (:func:`repeated_share`) as sent and in the two other
    layouts of ``bench_prefix_share.py --layouts`` ((a) the current observation as the newest
    history entry, (b) also the response instruction above the history), and the share of prompt
    tokens the loopback's prefix cache reported as cached (the records' ``cached_tokens``)."""
    from bench_prefix_share import prompt_text, rewrite

    actor = calls[calls["purpose"].astype(str) == "actor"].set_index("call_id")
    order = steps.sort_values(["episode_id", "step"])
    texts = {cid: prompt_text(raw) for cid, raw in actor["messages"].items()}
    out = {"repeated": repeated_share(order, texts)}
    for name, first, obs in (("layout_a", False, True), ("layout_b", True, True), ("layout_c", True, False)):
        moved = {cid: rewrite(t, condition, first, obs) for cid, t in texts.items()}
        out[name] = None if any(v is None for v in moved.values()) else repeated_share(order, moved)
    # a bound for histories that only grow: Recent-3-Only's window drops its oldest entry at every
    # step, so its prompts repeat at most the text before the window (as sent: the header and task)
    out["bound"] = None if condition.startswith("recent") else content_bound(order, texts)
    out["served"] = float(actor["cached_tokens"].fillna(0).sum() / max(1, actor["prompt_tokens"].fillna(0).sum()))
    out["prompt_words"] = sum(len(t.split()) for t in texts.values()) / max(1, len(texts))
    return out


def pct(x: float | None) -> str:
    return f"{x:6.1%}" if x is not None else f"{'-':>6}"


def prefix_only(folder: Path) -> None:
    """``--prefix-only``: the prefix figures of every job kept under ``folder``."""
    import pandas as pd

    for out in sorted(p for p in folder.iterdir() if (p / "calls.parquet").is_file()):
        condition = out.name.rsplit("-x", 1)[0]
        p = prefix_reuse(pd.read_parquet(out / "calls.parquet"), pd.read_parquet(out / "steps.parquet"), condition)
        print(f"{out.name:14} prefix {p['repeated']:6.1%} served {p['served']:6.1%} words/prompt {p['prompt_words']:6.0f} "
              f"layout (a) {pct(p['layout_a'])} (b) {pct(p['layout_b'])} (c) {pct(p['layout_c'])} content bound {pct(p['bound'])}")
