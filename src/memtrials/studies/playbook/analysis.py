"""The study's numbers from its artifacts: candidate and method scores, growth runs, costs.

Scores (Section 4): an episode scores 1 when the task is completed (on WebShop: its purchase
reward in [0, 1], :func:`.records.score`); a candidate's score
on a setting is 100 x the mean over evaluation tasks of the mean over that task's seeds
(:func:`method_score`).  A method's score is the score of the candidate it serves: No
playbook ``none``; Whole each run's ``whole:runk`` (Table 1's Whole: their mean over
runs); Best-Full and RBC the candidate their choice on practice episodes named; RBC-cut
``curated:run1``.  Costs (Tables 12-13) count episodes and model tokens (prompt +
completion, every call: actor, Reflector, Curator, embeddings) of growth, practice and
candidate scoring that each method needs before serving.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from memtrials.llm import read_records
from memtrials.studies.playbook.records import scores

SETTING_KEYS = ("growth", "model", "env", "variant")
_PATH = re.compile(r"results/playbook/(?P<growth>[^/]+)/(?P<model>[^/]+)/(?P<env>[^/]+)/(?P<variant>[^/]+)/")


def setting_of(path: str | Path) -> tuple[str, str, str, str]:
    """(growth, model, env, variant) of an artifact path under ``results/playbook``."""
    m = _PATH.search(Path(path).as_posix())
    if m is None:
        raise ValueError(f"{path}: not a playbook artifact path (results/playbook/<growth>/<model>/<env>/<variant>/...)")
    return m["growth"], m["model"], m["env"], m["variant"]


def method_score(episodes: pd.DataFrame) -> float:
    """100 x mean over tasks of the mean score over each task's seeds (success; the purchase
    reward on WebShop: :func:`.records.scores`)."""
    if episodes.empty:
        return float("nan")
    per_task = episodes.assign(y=scores(episodes)).groupby("task_id")["y"].mean()
    return 100.0 * float(per_task.mean())


def candidate_scores(eval_paths: Iterable[str]) -> pd.DataFrame:
    """One row per (setting, candidate): its evaluation score, episodes and served tokens."""
    rows = []
    for p in eval_paths:
        ep = pd.read_parquet(p)
        g, m, e, v = setting_of(p)
        name = str(ep["candidate"].iloc[0]) if len(ep) else Path(p).name.removesuffix(".parquet")
        rows.append({"growth": g, "model": m, "env": e, "variant": v, "candidate": name,
                     "score": method_score(ep), "episodes": int(len(ep)), "tasks": int(ep["task_id"].nunique()),
                     "served_tokens": int(ep["served_tokens"].iloc[0]) if len(ep) else 0,
                     "eval_tokens": int((ep["prompt_tokens"] + ep["completion_tokens"]).sum())})
    return pd.DataFrame(rows)


def read_json(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def by_setting(paths: Iterable[str]) -> dict[tuple[str, str, str, str], list[str]]:
    out: dict[tuple[str, str, str, str], list[str]] = {}
    for p in paths:
        out.setdefault(setting_of(p), []).append(p)
    return {k: sorted(v, key=run_number) for k, v in out.items()}


def run_number(path: str) -> int:
    """The growth run ``k`` a path's file name carries (``run<k>``), 0 when it has none."""
    m = re.search(r"run(\d+)", Path(path).name)
    return int(m.group(1)) if m else 0


def methods(choices: Mapping[tuple, Mapping[str, Any]], cands: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, method) with the candidate it serves and its evaluation score."""
    score = {(r.growth, r.model, r.env, r.variant, r.candidate): (r.score, r.served_tokens)
             for r in cands.itertuples(index=False)}
    rows = []
    for key, ch in choices.items():
        runs = list(ch["runs"])
        serve = {"No playbook": "none", "RBC-cut": ch["rbc_cut"], "Best-Full": ch["best_full"]["chosen"],
                 "RBC": ch["rbc"]["chosen"]}
        whole = [score.get((*key, f"whole:{r}"), (np.nan, 0)) for r in runs]
        rows.append({**dict(zip(SETTING_KEYS, key)), "method": "Whole", "candidate": "whole (mean over runs)",
                     "score": float(np.nanmean([w[0] for w in whole])) if whole else np.nan,
                     "served_tokens": float(np.mean([w[1] for w in whole])) if whole else 0.0})
        for method, cand in serve.items():
            s, t = score.get((*key, cand), (np.nan, 0))
            rows.append({**dict(zip(SETTING_KEYS, key)), "method": method, "candidate": cand, "score": s,
                         "served_tokens": float(t)})
    return pd.DataFrame(rows)


def growth_runs(growth: Sequence[str], practice: Sequence[str], cands: pd.DataFrame) -> pd.DataFrame:
    """Table 5: every growth run's passes, lessons, tokens, Whole and curated vs No playbook."""
    score = {(r.growth, r.model, r.env, r.variant, r.candidate): r.score for r in cands.itertuples(index=False)}
    prac = {(*setting_of(p), run_number(p)): read_json(p) for p in practice}
    rows = []
    for p in growth:
        rec, key = read_json(p), setting_of(p)
        k = int(rec["run"])
        last = rec["passes"][-1] if rec["passes"] else {"n_lessons": 0, "tokens": 0}
        pr = prac.get((*key, k), {})
        none = score.get((*key, "none"), np.nan)
        whole, cur = score.get((*key, f"whole:run{k}"), np.nan), score.get((*key, f"curated:run{k}"), np.nan)
        rows.append({**dict(zip(SETTING_KEYS, key)), "run": k, "passes": rec["n_passes"],
                     "lessons": last["n_lessons"], "tokens": last["tokens"],
                     "curated_tokens": (pr.get("curated") or {}).get("served_tokens", 0),
                     "blocks": (pr.get("blocks") or {}).get("m", 0), "none": none, "whole": whole, "curated": cur,
                     "whole_vs_none": whole - none, "curated_vs_none": cur - none})
    return pd.DataFrame(rows)


def parts(choices: Mapping[tuple, Mapping[str, Any]], cands: pd.DataFrame) -> pd.DataFrame:
    """Table 10: curate one run, choose alone, both on one run, both over K runs."""
    score = {(r.growth, r.model, r.env, r.variant, r.candidate): r.score for r in cands.itertuples(index=False)}
    rows = []
    for key, ch in choices.items():
        serve = {"No playbook": "none", "Curate one run (RBC-cut)": ch["rbc_cut"],
                 "Choose alone (Best-Full)": ch["best_full"]["chosen"],
                 "Both, one run (RBC, K=1)": ch["by_runs"][0]["rbc"]["chosen"],
                 f"Both, {len(ch['runs'])} runs (RBC)": ch["rbc"]["chosen"]}
        for part, cand in serve.items():
            rows.append({**dict(zip(SETTING_KEYS, key)), "part": part, "candidate": cand,
                         "score": score.get((*key, cand), np.nan)})
    return pd.DataFrame(rows)


def by_runs(choices: Mapping[tuple, Mapping[str, Any]], cands: pd.DataFrame) -> pd.DataFrame:
    """Figure 6: RBC's and Best-Full's evaluation scores when choosing over the first j runs."""
    score = {(r.growth, r.model, r.env, r.variant, r.candidate): r.score for r in cands.itertuples(index=False)}
    rows = []
    for key, ch in choices.items():
        for step in ch["by_runs"]:
            for method in ("rbc", "best_full"):
                cand = step[method]["chosen"]
                rows.append({**dict(zip(SETTING_KEYS, key)), "runs": int(step["runs"]),
                             "method": {"rbc": "RBC", "best_full": "Best-Full"}[method], "candidate": cand,
                             "score": score.get((*key, cand), np.nan)})
    return pd.DataFrame(rows)


def job_tokens(path: str | Path) -> tuple[int, int]:
    """(calls, prompt + completion tokens) of one job's call records."""
    rec = read_records(path).to_pandas()
    return int(len(rec)), int(rec["prompt_tokens"].fillna(0).sum() + rec["completion_tokens"].fillna(0).sum())


def costs(growth: Sequence[str], practice: Sequence[str], choice_paths: Sequence[str],
          choices: Mapping[tuple, Mapping[str, Any]], cands: pd.DataFrame) -> pd.DataFrame:
    """Tables 12-13: episodes and tokens each method spends before serving, and serves per task."""
    grow: dict[tuple, list[tuple[int, int, int]]] = {}
    for p in growth:
        rec = read_json(p)
        calls = rec["calls"]
        tokens = sum(v["prompt_tokens"] + v["completion_tokens"] for v in calls.values())
        eps = sum(s["episodes"] for s in rec["passes"])
        extra = sum(v["calls"] for k, v in calls.items() if k in ("ace_reflector", "ace_curator", "dc_curator"))
        grow.setdefault(setting_of(p), []).append((eps, tokens, extra))
    prac: dict[tuple, list[tuple[int, int]]] = {}
    for p in practice:
        calls_path = str(p).removesuffix(".json") + ".calls.parquet"
        _, tok = job_tokens(calls_path)
        prac.setdefault(setting_of(p), []).append((int(read_json(p)["episodes"]), tok))
    per_cand: dict[tuple, pd.DataFrame] = {}
    for p in choice_paths:
        ep = pd.read_parquet(str(p).removesuffix(".json") + ".parquet")
        per_cand[setting_of(p)] = ep.assign(t=ep["prompt_tokens"] + ep["completion_tokens"]).groupby(
            "candidate").agg(episodes=("t", "size"), tokens=("t", "sum"))
    served = methods(choices, cands).set_index([*SETTING_KEYS, "method"])["served_tokens"]
    rows = []
    for key, ch in choices.items():
        g, pr, cc = grow.get(key, []), prac.get(key, []), per_cand.get(key)
        K = len(ch["runs"])
        bf = [f"whole:{r}" for r in ch["runs"]] + ["none"]

        def choice_cost(names: Sequence[str]) -> tuple[int, int]:
            sub = cc.loc[[n for n in names if n in cc.index]] if cc is not None else None
            return (int(sub["episodes"].sum()), int(sub["tokens"].sum())) if sub is not None else (0, 0)

        plans = {
            "No playbook": (0, 0, 0, 0, 0, 0),
            "Whole": (g[0][0] if g else 0, g[0][1] if g else 0, g[0][2] if g else 0, 0, 0, 0),
            "RBC-cut": (g[0][0] if g else 0, g[0][1] if g else 0, g[0][2] if g else 0,
                        pr[0][0] if pr else 0, pr[0][1] if pr else 0, 0),
            "Best-Full": (sum(x[0] for x in g), sum(x[1] for x in g), sum(x[2] for x in g), 0, 0, None),
            "RBC": (sum(x[0] for x in g), sum(x[1] for x in g), sum(x[2] for x in g),
                    sum(x[0] for x in pr), sum(x[1] for x in pr), None),
        }
        for method, (ge, gt, calls, pe, pt, _) in plans.items():
            ce, ct = (choice_cost(bf) if method == "Best-Full" else choice_cost(list(cc.index)) if
                      method == "RBC" and cc is not None else (0, 0))
            rows.append({**dict(zip(SETTING_KEYS, key)), "method": method, "runs": K if method in (
                "Best-Full", "RBC") else (1 if method != "No playbook" else 0),
                "growth_episodes": ge, "reflector_curator_calls": calls, "practice_episodes": pe,
                "choice_episodes": ce, "episodes": ge + pe + ce, "growth_tokens": gt, "practice_tokens": pt,
                "choice_tokens": ct, "tokens": gt + pt + ct,
                "served_tokens_per_task": float(served.get((*key, method), 0.0))})
    return pd.DataFrame(rows)
