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
  exceed (:func:`prefix_ceiling`, which ``bench_default_choice.py`` uses too);
- prompt tokens per call, so what the share is a share of is in view.

Groups: the history study by rule and condition (``rollouts/raw`` pools the environments),
shuffled conditions marked; the playbook study by rule and call purpose.  The last line is the
pooled share of the non-shuffled history and playbook calls against the 80 % target.

``--by-step`` adds each study's actor calls by the steps their episode had taken
(served share and prefix ceiling per step: an episode's first prompt shares little with anything).

``--layouts`` adds a what-if for the history study's actor prompt (block format, non-shuffled
conditions, each distinct request once, in the order the run sent them): the pooled prefix
ceiling of the prompts as sent, and of the same prompts rewritten into two other layouts that
would keep more of each prompt in the next one's prefix: (a) the current observation written as
the newest history entry (``[Observation t: 'O_t']``, ``[Outcome of Action t-1: 'O_t']`` under
Causal) instead of ``Current observation: O_t`` after the step line, so that the next prompt,
whose history line for step t repeats ``O_t``, shares it; (b) that, with the response
instruction moved from the end to above the history.  The rewrite reads the rendered prompts of
``config/prompts/actor/actor_block.txt``; a prompt it cannot read is counted and left out.

    python benchmarks/bench_prefix_share.py --results results [--studies history playbook] [--by-step] [--layouts]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


def shared_prefixes(texts) -> list[tuple[int, int]]:
    """``(characters shared as a prefix with the best earlier text, length)`` for each text, in order."""
    seen: list[str] = []
    out = []
    for text in texts:
        out.append((max((len(os.path.commonprefix([s, text])) for s in seen), default=0), len(text)))
        seen.append(text)
    return out


def prefix_ceiling(calls) -> float:
    """Mean over calls of the share of a prompt's characters that it shares, as a prefix, with an
    earlier prompt of the same file (or cell): what a perfect prefix cache could serve."""
    shares = [best / max(1, n) for best, n in shared_prefixes(prompt_text(raw) for raw in calls["messages"])]
    return sum(shares) / max(1, len(shares))


# the tail of a block-format actor prompt (actor_block.txt): reminder, step line, current
# observation, admissible actions, response instruction
_TAIL = re.compile(
    r"\n((?:\[History caution\].*?\[/History caution\]\n)?)"
    r"You have already taken (\d+) step\(s\) and are now at step (\d+)\. "
    r"Current observation(?: \(Outcome of Action \d+\))?: (.*?)\n"
    r"(Admissible actions:\n.*?\n\n)?((?:Reply |First think ).*)$", re.S)


def rewrite(prompt: str, condition: str, instruction_first: bool, observation_in_history: bool = True) -> str | None:
    """``prompt`` (block format) in layout (a), or (b) with ``instruction_first``, or (c) with
    ``instruction_first`` and not ``observation_in_history`` (only the response instruction moved
    above the history, the tail as sent); None if unreadable."""
    m = _TAIL.search(prompt)
    if m is None or "\nBelow are" not in prompt:
        return None
    reminder, taken, step, observation, actions, instruction = m.groups()
    if not observation_in_history:
        return prompt[:m.start(6)].replace("\nBelow are", f"\n{instruction}\nBelow are", 1)
    head = prompt[:m.start()]
    head = head[: -len("\nNone")] if head.endswith("\nNone") else head  # the empty history
    t = int(step)
    label = (("Initial Observation 1" if t == 1 else f"Outcome of Action {t - 1}") if condition == "causal"
             else f"Observation {t}")
    tail = (f"\n[{label}: '{observation}']\n{reminder}You have already taken {taken} step(s) and are now at "
            f"step {t}; the last observation above is the current one.\n{actions or ''}")
    if instruction_first:
        return head.replace("\nBelow are", f"\n{instruction}\nBelow are", 1) + tail
    return head + tail + instruction


def pooled_ceiling(prompts: list[str]) -> float:
    """Share of all prompts' characters that each shares, as a prefix, with any earlier prompt."""
    pairs = shared_prefixes(prompts)
    return sum(best for best, _ in pairs) / max(1, sum(n for _, n in pairs))


def layouts(results: Path) -> None:
    """The what-if of ``--layouts`` (module docstring)."""
    import pandas as pd

    calls = []
    for path in sorted((results / "history" / "rollouts").rglob("*.calls.parquet")):
        condition = path.name[: -len(".calls.parquet")]
        if condition in SHUFFLED or condition.endswith("-chat"):
            continue
        frame = pd.read_parquet(path)
        frame = frame[frame["purpose"].astype(str) == "actor"]
        for row in frame.itertuples():
            calls.append((str(row.started_at), row.request_digest, prompt_text(row.messages), condition,
                          int(row.prompt_tokens or 0), int(row.cached_tokens or 0)))
    calls.sort()
    distinct, seen = [], set()
    for call in calls:  # a request another cell had made is a response-cache replay: counted once
        if call[1] not in seen:
            seen.add(call[1])
            distinct.append(call)
    if not distinct:
        sys.exit(f"{results}: no history rollout actor calls")
    now = [c[2] for c in distinct]
    a = [rewrite(c[2], c[3], False) for c in distinct]
    b = [rewrite(c[2], c[3], True) for c in distinct]
    bad = sum(x is None for x in a)
    keep = [i for i, x in enumerate(a) if x is not None]
    served = sum(distinct[i][5] for i in keep) / max(1, sum(distinct[i][4] for i in keep))
    print(f"history actor prompts (block, non-shuffled): {len(calls)} calls, {len(distinct)} distinct requests, "
          f"{bad} unreadable")
    print(f"  served from the server's prefix cache: {served:.1%} of prompt tokens")
    print(f"  pooled prefix ceiling, as sent:                          {pooled_ceiling([now[i] for i in keep]):.1%}")
    print(f"  (a) current observation as the newest history entry:     {pooled_ceiling([a[i] for i in keep]):.1%}")
    print(f"  (b) (a) with the response instruction above the history: {pooled_ceiling([b[i] for i in keep]):.1%}")


_TAKEN = re.compile(r"You have already taken (\d+) step\(s\)")


def actor_step(raw: str) -> int:
    """The steps an episode had taken when its actor prompt was sent: block format, the step line
    (``You have already taken t step(s)``, whatever the condition keeps of the history); chat
    format, its assistant messages."""
    items = json.loads(raw)
    items = items if isinstance(items, list) else [items]
    chat = sum(1 for m in items if isinstance(m, dict) and m.get("role") == "assistant")
    taken = _TAKEN.findall(prompt_text(raw))
    return int(taken[-1]) if taken else chat


def by_step(results: Path, studies: list[str]) -> None:
    """``--by-step``: actor calls of each study by the steps their episode had taken
    (a non-shuffled cell's own order), with the served share and the prefix ceiling of each."""
    import pandas as pd

    for study in studies:
        acc: dict[int, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
        for path in sorted((results / study).rglob("*.calls.parquet")):
            if path.name[: -len(".calls.parquet")] in SHUFFLED:
                continue
            calls = pd.read_parquet(path)
            if calls.empty or "purpose" not in calls or "cached_tokens" not in calls:
                continue
            calls = calls[calls["purpose"].astype(str) == "actor"].sort_values("started_at")
            pairs = shared_prefixes(prompt_text(raw) for raw in calls["messages"])
            for raw, pt, ct, (best, n) in zip(calls["messages"], calls["prompt_tokens"], calls["cached_tokens"], pairs):
                a = acc[actor_step(raw)]
                a[0] += 1
                a[1] += int(pt or 0)
                a[2] += int(ct or 0)
                a[3] += best / max(1, n)
        if not acc:
            continue
        total = sum(a[1] for a in acc.values())
        print(f"{study} actor calls by the steps their episode had taken (non-shuffled cells):")
        print(f"  {'steps':>5} {'calls':>6} {'prompt tok':>10} {'of all':>7} {'cached':>7} {'ceiling':>7}")
        for step, (calls_n, pt, ct, ceil) in sorted(acc.items()):
            print(f"  {step:5d} {calls_n:6d} {pt:10d} {pt / max(1, total):7.1%} {ct / max(1, pt):7.1%} "
                  f"{ceil / max(1, calls_n):7.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=REPO / "results")
    ap.add_argument("--studies", nargs="+", default=["history", "playbook"])
    ap.add_argument("--layouts", action="store_true", help="also the history actor prompt's layout what-if")
    ap.add_argument("--by-step", action="store_true", help="also actor calls by the steps taken")
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
    if args.by_step:
        by_step(args.results, args.studies)
    if args.layouts:
        layouts(args.results)


if __name__ == "__main__":
    main()
