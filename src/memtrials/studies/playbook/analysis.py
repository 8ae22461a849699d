"""The study's numbers from its artifacts: candidate and method scores, growth runs, costs.

Scores (Section 4): an episode scores 1 when the task is completed (on WebShop: its purchase
reward in [0, 1], :func:`.records.score`); a candidate's score
on a setting is 100 x the mean over evaluation tasks of the mean over that task's seeds
(:func:`method_score`).  A method's score is the score of the candidate it serves: No
playbook ``none``; Whole each run's ``whole:runk`` (Table 1's Whole: their mean over the
cut runs); Best-Full and RBC the candidate their choice on practice episodes named (over
Table 1's K); RBC-cut the mean of ``curated:runk`` over the cut runs, the runs every
budgeted baseline cuts (:func:`cut_runs`).  Costs (Tables 12-13) count episodes and model tokens (prompt +
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
        cut = cut_runs(ch)
        chosen_over = ",".join(list(ch["runs"])[:headline_k(ch)])
        for method, names in (("Whole", [f"whole:{r}" for r in cut]), ("RBC-cut", [f"curated:{r}" for r in cut])):
            got = [score.get((*key, n), (np.nan, 0)) for n in names]
            rows.append({**dict(zip(SETTING_KEYS, key)), "method": method,
                         "candidate": names[0] if len(names) == 1 else f"{method.lower()} (mean over {len(names)} runs)",
                         "score": float(np.nanmean([g[0] for g in got])) if got else np.nan,
                         "served_tokens": float(np.mean([g[1] for g in got])) if got else 0.0, "runs": ",".join(cut)})
        serve = {"No playbook": ("none", ""), "Best-Full": (ch["best_full"]["chosen"], chosen_over),
                 "RBC": (ch["rbc"]["chosen"], chosen_over)}
        for method, (cand, over) in serve.items():
            s, t = score.get((*key, cand), (np.nan, 0))
            rows.append({**dict(zip(SETTING_KEYS, key)), "method": method, "candidate": cand, "score": s,
                         "served_tokens": float(t), "runs": over})
    return pd.DataFrame(rows)


def cut_runs(choice: Mapping[str, Any]) -> list[str]:
    """The runs behind RBC-cut, Whole and every budgeted baseline of a setting (the choice record's
    ``cut_runs``; a record from before them: run 1, RBC-cut's run then)."""
    return list(choice.get("cut_runs") or list(choice["runs"])[:1])


def headline_k(choice: Mapping[str, Any]) -> int:
    """K of Table 1's RBC and Best-Full (the choice record's ``k``; before it: every run)."""
    return int(choice.get("k") or len(choice["runs"]))


def rbc_cut_name(choice: Mapping[str, Any]) -> str:
    """RBC-cut's candidate when it stands on one run, else a label of the runs it averages."""
    cut = cut_runs(choice)
    return f"curated:{cut[0]}" if len(cut) == 1 else f"curated (mean over {len(cut)} runs)"


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
        cut = [f"curated:{r}" for r in cut_runs(ch)]
        serve = {"No playbook": "none", "Curate one run (RBC-cut)": None,
                 "Choose alone (Best-Full)": ch["best_full"]["chosen"],
                 "Both, one run (RBC, K=1)": ch["by_runs"][0]["rbc"]["chosen"],
                 f"Both, {headline_k(ch)} runs (RBC)": ch["rbc"]["chosen"]}
        for part, cand in serve.items():
            got = score.get((*key, cand), np.nan) if cand is not None else float(np.nanmean(
                [score.get((*key, c), np.nan) for c in cut]))
            rows.append({**dict(zip(SETTING_KEYS, key)), "part": part, "candidate": cand or rbc_cut_name(ch),
                         "score": got})
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
          choices: Mapping[tuple, Mapping[str, Any]], cands: pd.DataFrame, every_k: bool = False) -> pd.DataFrame:
    """Tables 12-13: episodes and tokens each method spends before serving, and serves per task
    (RBC and Best-Full at Table 1's K).  ``every_k``: instead RBC and Best-Full choosing over the
    first j = 1..K grown runs (Table 13 / Figure 6), each with its evaluation score."""
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
    score = {(r.growth, r.model, r.env, r.variant, r.candidate): (r.score, r.served_tokens)
             for r in cands.itertuples(index=False)}
    rows = []
    for key, ch in choices.items():
        g, pr, cc = grow.get(key, []), prac.get(key, []), per_cand.get(key)

        def choice_cost(names: Sequence[str]) -> tuple[int, int]:
            sub = cc.loc[[n for n in names if n in cc.index]] if cc is not None else None
            return (int(sub["episodes"].sum()), int(sub["tokens"].sum())) if sub is not None else (0, 0)

        def chooser(method: str, j: int) -> tuple[int, int, int, int, int, int, int]:
            runs = list(ch["runs"])[:j]
            names = [f"whole:{r}" for r in runs] + ["none"]
            if method == "RBC":
                names = [f"curated:{r}" for r in runs] + names
            ce, ct = choice_cost(names)
            pe, pt = (sum(x[0] for x in pr[:j]), sum(x[1] for x in pr[:j])) if method == "RBC" else (0, 0)
            return (sum(x[0] for x in g[:j]), sum(x[1] for x in g[:j]), sum(x[2] for x in g[:j]), pe, pt, ce, ct)

        def row(method: str, j: int, plan: tuple[int, ...], **extra: Any) -> dict[str, Any]:
            ge, gt, calls, pe, pt, ce, ct = plan
            return {**dict(zip(SETTING_KEYS, key)), "method": method, "runs": j,
                    "growth_episodes": ge, "reflector_curator_calls": calls, "practice_episodes": pe,
                    "choice_episodes": ce, "episodes": ge + pe + ce, "growth_tokens": gt, "practice_tokens": pt,
                    "choice_tokens": ct, "tokens": gt + pt + ct, **extra}

        if every_k:
            for step in ch["by_runs"]:
                j = int(step["runs"])
                for method, k in (("RBC", "rbc"), ("Best-Full", "best_full")):
                    s, t = score.get((*key, step[k]["chosen"]), (np.nan, 0))
                    rows.append(row(method, j, chooser(method, j), score=s, served_tokens_per_task=float(t)))
            continue
        one = (g[0][0], g[0][1], g[0][2]) if g else (0, 0, 0)
        plans = {"No playbook": (0, (0,) * 7), "Whole": (1, (*one, 0, 0, 0, 0)),
                 "RBC-cut": (1, (*one, pr[0][0] if pr else 0, pr[0][1] if pr else 0, 0, 0)),
                 "Best-Full": (headline_k(ch), chooser("Best-Full", headline_k(ch))),
                 "RBC": (headline_k(ch), chooser("RBC", headline_k(ch)))}
        for method, (j, plan) in plans.items():
            rows.append(row(method, j, plan, served_tokens_per_task=float(served.get((*key, method), 0.0))))
    return pd.DataFrame(rows)


def table13_level(by_k: pd.DataFrame, ref_k: int) -> pd.DataFrame:
    """Table 13's reading: per method and number of runs j, the mean over settings of the score
    and of the tokens spent before serving, and the extra tokens against RBC at Table 1's K
    (``ref_k``) in percent.  The row where Best-Full first comes level with RBC is the paper's
    "two more runs and 17 % more tokens"."""
    if by_k.empty:
        return pd.DataFrame()
    std = by_k[by_k["growth"] == "std"]
    mean = std.groupby(["method", "runs"], as_index=False)[["score", "tokens", "served_tokens_per_task"]].mean()
    ref = mean[(mean["method"] == "RBC") & (mean["runs"] == ref_k)]
    if ref.empty:
        return mean
    r_score, r_tokens = float(ref["score"].iloc[0]), float(ref["tokens"].iloc[0])
    mean["extra_tokens_vs_rbc_%"] = 100.0 * (mean["tokens"] / r_tokens - 1.0) if r_tokens else np.nan
    mean["level_with_rbc"] = mean["score"] >= r_score
    return mean


def agreement(choices: Mapping[tuple, Mapping[str, Any]], cands: pd.DataFrame) -> pd.DataFrame:
    """Section 6.5: per setting, how practice success ranks the candidates of Table 1's K (2K+1)
    against evaluation success (Spearman over candidates), whether RBC's choice is the best
    candidate on evaluation and whether it is within half a point of it."""
    from scipy.stats import spearmanr

    score = {(r.growth, r.model, r.env, r.variant, r.candidate): r.score for r in cands.itertuples(index=False)}
    rows = []
    for key, ch in choices.items():
        head = list(ch["runs"])[:headline_k(ch)]
        names = [f"{c}:{r}" for c in ("curated", "whole") for r in head] + ["none"]
        prac = {c["name"]: c["practice_score"] for c in ch["candidates"]}
        pairs = [(100.0 * float(prac[n]), score.get((*key, n), np.nan)) for n in names if prac.get(n) is not None]
        pairs = [(x, y) for x, y in pairs if np.isfinite(x) and np.isfinite(y)]
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
        rho = float(spearmanr(xs, ys)[0]) if len(pairs) >= 3 and len(set(xs)) > 1 and len(set(ys)) > 1 else np.nan
        best = max(ys) if ys else np.nan
        got = score.get((*key, ch["rbc"]["chosen"]), np.nan)
        rows.append({**dict(zip(SETTING_KEYS, key)), "candidates": len(pairs), "spearman": rho,
                     "rbc_eval": got, "best_eval": best, "rbc_is_best": bool(np.isfinite(got) and got >= best),
                     "rbc_within_half_point": bool(np.isfinite(got) and got >= best - 0.5)})
    return pd.DataFrame(rows)


def agreement_summary(agree: pd.DataFrame) -> pd.DataFrame:
    """The paper's reading of :func:`agreement`: median Spearman over settings (those where it is
    defined), and in how many settings RBC picks the best candidate on evaluation or one within
    half a point of it, per growth recipe and system."""
    if agree.empty:
        return pd.DataFrame()
    system = agree["variant"].map(lambda v: "ACE" if str(v).startswith("ace") else "DC" if v == "dc" else str(v))
    out = []
    for (g, sysname), grp in agree.assign(system=system).groupby(["growth", "system"]):
        out.append({"growth": g, "system": sysname, "settings": int(len(grp)),
                    "median Spearman": float(grp["spearman"].median()) if grp["spearman"].notna().any() else np.nan,
                    "settings with Spearman defined": int(grp["spearman"].notna().sum()),
                    "RBC picks the best": int(grp["rbc_is_best"].sum()),
                    "RBC within 0.5 points": int(grp["rbc_within_half_point"].sum())})
    return pd.DataFrame(out)
