"""Prompt-prefix reuse of a bench_scale job's actor prompts (issue 39):
as sent, in the two other layouts of ``bench_prefix_share.py --layouts``, and as the loopback's
played prefix cache reported it (the records' ``cached_tokens``)."""

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
    for name, first in (("layout_a", False), ("layout_b", True)):
        moved = {cid: rewrite(t, condition, first) for cid, t in texts.items()}
        out[name] = None if any(v is None for v in moved.values()) else repeated_share(order, moved)
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
              f"layout (a) {pct(p['layout_a'])} (b) {pct(p['layout_b'])}")
