"""Stages 5-6 of the labels (section 6.1, Appendix E.2): one label row per context, and the
SFT dataset of one variant as chat-format JSONL plus Parquet.

Per context: a direct NOUPDATE -> NOUPDATE; a CALIBRATE that fails the screen -> NOUPDATE;
a screened candidate -> the rule of :func:`labels.target` over the recipient actors' pair
outcomes (``full``), or CALIBRATE from the screen alone (``screen_only``).  A generator reply
that is neither valid output has no target and is left out of both datasets (counted in
the label statistics).  The prompt of every example is the G.2 review the generator saw;
the target is the interface's own JSON output, so the trained calibrator serves through
the same review call.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import table
from memtrials.io import atomic_write_text, write_parquet
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.generate import read_contexts
from memtrials.studies.history.calibrator.labels import margin, screen_only_target, target, target_text
from memtrials.studies.history.calibrator.schemas import LABEL_SCHEMA

VARIANTS = ("full", "screen_only")
DATASET_SCHEMA = pa.schema([
    ("context_id", pa.string()), ("env", pa.string()), ("task_id", pa.string()),   # the source (training) task
    ("variant", pa.string()), ("decision", pa.string()),
    ("target", pa.string()), ("prompt", pa.string()),   # JSON list of chat messages
])


def _str(v: Any) -> str | None:
    """A string cell read back from Parquet (pandas gives NaN for a missing one)."""
    return v if isinstance(v, str) else None


def label_rows(contexts: Sequence[Context], generated: pd.DataFrame, screen: pd.DataFrame,
               compares: Sequence[pd.DataFrame], n_actors: int) -> list[dict[str, Any]]:
    """One ``LABEL_SCHEMA`` row per context (module docstring)."""
    gen = {r["context_id"]: r for r in generated.to_dict("records")}
    scr = {r["context_id"]: r for r in screen.to_dict("records")}
    pairs: dict[str, list[dict[str, Any]]] = {}
    for df in compares:
        for r in df.to_dict("records"):
            pairs.setdefault(r["context_id"], []).append(r)
    rows = []
    for c in contexts:
        g = gen.get(c.context_id)
        if g is None:
            raise ValueError(f"calibrator labels: context {c.context_id} has no generator review")
        decision, exp = g["decision"], _str(g["experience"])
        s = scr.get(c.context_id)
        screened = s is not None
        passed = bool(s["passed"]) if screened else False
        if decision == "CALIBRATE" and not screened:
            raise ValueError(f"calibrator labels: candidate {c.context_id} was not screened")
        ps = pairs.get(c.context_id, [])
        if passed and len(ps) != n_actors:
            raise ValueError(f"calibrator labels: candidate {c.context_id} has {len(ps)} actor pairs, {n_actors} "
                             "recipient actors are configured")
        outs = [p["outcome"] for p in ps]
        up, down, q = margin(outs)
        if decision == "INVALID":
            full = screen_only = None
        elif decision == "NOUPDATE" or not passed:
            full = screen_only = "NOUPDATE"
        else:
            full, screen_only = target(outs), screen_only_target(True)
        rows.append({
            "context_id": c.context_id, "source_model": c.source_model, "env": c.env, "task_id": c.task_id,
            "decision": decision,
            "experience": exp, "screened": screened, "screen_passed": passed, "n_actors": len(ps),
            "n_up": up, "n_down": down, "n_tie": outs.count("tie"),
            "n_tie_no_judge": sum(bool(p["identical"]) for p in ps), "q": q if passed else None,
            "target_full": full, "target_screen_only": screen_only})
    return rows


def examples(contexts: Sequence[Context], labels: pd.DataFrame, prompts: ActorPrompts,
             variant: str) -> list[dict[str, Any]]:
    """The SFT examples of ``variant``: ``prompt`` (the G.2 review messages) and ``target``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown calibrator dataset variant {variant!r}; known: {', '.join(VARIANTS)}")
    by_id = {c.context_id: c for c in contexts}
    out = []
    for r in labels.to_dict("records"):
        decision = _str(r[f"target_{variant}"])
        if decision is None:   # an invalid generator reply: no target
            continue
        c = by_id[r["context_id"]]
        msgs = prompts.review_messages(env=c.env, task=c.task, history=c.review_history(), action=c.action,
                                       observation=c.observation)
        out.append({"context_id": c.context_id, "env": c.env, "task_id": c.task_id, "variant": variant,
                    "decision": decision,
                    "target": target_text(decision, _str(r["experience"]) if decision == "CALIBRATE" else None),
                    "prompt": msgs})
    return out


def write_labels(*, contexts_path: str, generated_path: str, screen_path: str, compare_paths: Sequence[str],
                 out: str) -> pd.DataFrame:
    rows = label_rows(read_contexts(contexts_path), pd.read_parquet(generated_path), pd.read_parquet(screen_path),
                      [pd.read_parquet(p) for p in compare_paths], len(compare_paths))
    write_parquet(table(rows, LABEL_SCHEMA), out)
    return table(rows, LABEL_SCHEMA).to_pandas()


def write_dataset(*, contexts_path: str, labels_path: str, actor_prompts_dir: str, variant: str, out_jsonl: str,
                  out_parquet: str) -> list[dict[str, Any]]:
    """``out_jsonl``: one ``{"context_id", "env", "task_id", "prompt": [messages], "target", "messages":
    [... + assistant]}``
    line per example; ``out_parquet``: the same rows (``DATASET_SCHEMA``)."""
    exs = examples(read_contexts(contexts_path), pd.read_parquet(labels_path), ActorPrompts.load(actor_prompts_dir),
                   variant)
    lines = [json.dumps({"context_id": e["context_id"], "env": e["env"], "task_id": e["task_id"],
                         "prompt": e["prompt"], "target": e["target"],
                         "messages": [*e["prompt"], {"role": "assistant", "content": e["target"]}]},
                        ensure_ascii=False) for e in exs]
    atomic_write_text(out_jsonl, "".join(line + "\n" for line in lines))
    write_parquet(table([{**e, "prompt": json.dumps(e["prompt"], ensure_ascii=False)} for e in exs],
                        DATASET_SCHEMA), out_parquet)
    return exs


def label_stats(labels: pd.DataFrame, compares: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
    """The label statistics: decision and target shares, the q distribution, judge-free ties."""
    n = len(labels)
    allp = pd.concat(list(compares.values())) if compares else pd.DataFrame(columns=["identical", "outcome"])
    stats: dict[str, Any] = {
        "contexts": n,
        "generator_noupdate": int((labels["decision"] == "NOUPDATE").sum()),
        "generator_calibrate": int((labels["decision"] == "CALIBRATE").sum()),
        "generator_invalid": int((labels["decision"] == "INVALID").sum()),
        "screen_failed": int((labels["screened"] & ~labels["screen_passed"]).sum()),
        "screen_passed": int(labels["screen_passed"].sum()),
        "pairs": int(len(allp)), "pairs_tie_no_judge": int(allp["identical"].astype(bool).sum()),
        "q_distribution": {str(int(k)): int(v) for k, v in labels["q"].dropna().value_counts().sort_index().items()},
    }
    for v in VARIANTS:
        col = labels[f"target_{v}"]
        stats[f"{v}_calibrate"] = int((col == "CALIBRATE").sum())
        stats[f"{v}_noupdate"] = int((col == "NOUPDATE").sum())
    return stats
