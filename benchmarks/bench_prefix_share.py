"""Prompt-prefix reuse of a finished run: the share of prompt tokens the embedded model's
server served from its prefix cache, read from the run's own call records.

Every call record keeps ``prompt_tokens`` and ``cached_tokens`` (llama.cpp's
``usage.prompt_tokens_details.cached_tokens``, stored by the client for every endpoint).  This
reads every ``*.calls.parquet`` under ``--results`` (the history and playbook studies by
default) of a run whose calls were made fresh (read it on a fresh run's results: the figure is
the server's, and only a call that reached the server has one), and prints per group

- calls, prompt tokens, cached tokens and their share (the issue-14 figure);
- the *prefix ceiling*: the share of each prompt's characters that it shares as a prefix with
  an earlier prompt of the same file (one cell), averaged over calls, which no prefix cache can
  exceed (``bench_default_choice.prefix_ceiling``);
- prompt tokens per call, so what the share is a share of is in view.

Groups: the history study by rule and condition (``rollouts/raw`` pools the environments),
shuffled conditions marked; the playbook study by rule and call purpose.  The last line is the
pooled share of the non-shuffled history and playbook calls against the 80 % target.

    python benchmarks/bench_prefix_share.py --results results [--studies history playbook]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SHUFFLED = ("shuffle_all", "shuffle_old")
TARGET = 0.80


def group_of(rel: Path, study: str) -> str:
    """A history file ``rollouts/<model>/<env>/<condition>.calls.parquet`` -> ``rollouts/<condition>``;
    a playbook file ``<growth>/<model>/<env>/<variant>/<rule>/...`` -> ``<rule>``."""
    parts = rel.parts
    stem = rel.name[: -len(".calls.parquet")]
    if study == "history":
        return f"{parts[0]}/{stem}" if parts[0] != "probe" else "probe"
    rule = parts[4] if len(parts) > 5 else stem
    return rule


def prompt_text(raw: str) -> str:
    """A call record's ``messages`` (JSON: chat messages, or the texts of an embedding call) as one string."""
    items = json.loads(raw)
    items = items if isinstance(items, list) else [items]
    return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in items)


def prefix_ceiling(calls) -> float:
    """Mean over calls of the share of a prompt's characters that it shares, as a prefix, with an
    earlier prompt of the same file: what a perfect prefix cache could serve (as
    ``bench_default_choice.prefix_ceiling``, which reads chat messages only)."""
    seen: list[str] = []
    shares = []
    for raw in calls["messages"]:
        text = prompt_text(raw)
        best = max((len(os.path.commonprefix([s, text])) for s in seen), default=0)
        shares.append(best / max(1, len(text)))
        seen.append(text)
    return sum(shares) / max(1, len(shares))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=REPO / "results")
    ap.add_argument("--studies", nargs="+", default=["history", "playbook"])
    args = ap.parse_args()

    import pandas as pd

    rows: dict[tuple[str, str, str], dict] = defaultdict(lambda: {"calls": 0, "prompt": 0, "cached": 0,
                                                                  "ceil_w": 0.0})
    files = 0
    for study in args.studies:
        root = args.results / study
        for path in sorted(root.rglob("*.calls.parquet")):
            calls = pd.read_parquet(path)
            if calls.empty or "cached_tokens" not in calls:
                continue
            if "purpose" in calls:  # embeddings have no prefix cache
                calls = calls[~calls["purpose"].astype(str).str.startswith("embed")]
                if calls.empty:
                    continue
            files += 1
            group = group_of(path.relative_to(root), study)
            purposes = calls["purpose"].astype(str) if "purpose" in calls else pd.Series(["-"] * len(calls))
            for purpose, part in calls.groupby(purposes.str.split("/").str[0].to_numpy(), sort=True):
                key = (study, group, purpose if study == "playbook" else "-")
                r = rows[key]
                r["calls"] += len(part)
                r["prompt"] += int(part["prompt_tokens"].fillna(0).sum())
                r["cached"] += int(part["cached_tokens"].fillna(0).sum())
                r["ceil_w"] += prefix_ceiling(part) * len(part)
    if not files:
        sys.exit(f"{args.results}: no *.calls.parquet under {', '.join(args.studies)}")
    print(f"{'study':9} {'group':28} {'purpose':12} {'calls':>6} {'prompt tok':>10} {'tok/call':>8} "
          f"{'cached':>7} {'ceiling':>7}")
    pooled = {"prompt": 0, "cached": 0}
    for (study, group, purpose), r in sorted(rows.items()):
        share = r["cached"] / max(1, r["prompt"])
        ceil = r["ceil_w"] / max(1, r["calls"])
        mark = " (shuffled)" if group.split("/")[-1] in SHUFFLED else ""
        print(f"{study:9} {group + mark:28} {purpose:12} {r['calls']:6d} {r['prompt']:10d} "
              f"{r['prompt'] / max(1, r['calls']):8.0f} {share:7.1%} {ceil:7.1%}")
        if not mark:
            pooled["prompt"] += r["prompt"]
            pooled["cached"] += r["cached"]
    share = pooled["cached"] / max(1, pooled["prompt"])
    print(f"pooled non-shuffled {', '.join(args.studies)}: {pooled['cached']} of {pooled['prompt']} prompt tokens "
          f"from the prefix cache = {share:.1%} (target {TARGET:.0%}: {'met' if share >= TARGET else 'not met'})")


if __name__ == "__main__":
    main()
