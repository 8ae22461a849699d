"""Diagnostics of the playbook study from its artifacts (no new episode): tags against measured
effects, the harmful blocks, subsampled practice rounds, and the split-half check.

*Reliable Memory from Unstable Growth*, Section 6 and Appendix E.

- :func:`block_tags` / :func:`tags_vs_effects` (Figure 5 analogue): per block of an ACE
  run, the share of helpful tags among all tags its lessons got during growth, and the
  block's ridge estimate; the Spearman correlation over blocks, and where the most harmful
  block of each run sits in the tag ranking (its percentile: 1 = the most helpful-tagged).
- :func:`harmful_blocks` (Table 4 analogue): every block with a negative estimate in a run
  whose whole playbook scores below No playbook on the evaluation tasks, with one lesson
  and its tag share (DC blocks carry no tags).
- :func:`subsampled` (Table 17 analogue): the practice round cut to its first 25 / 50 / 75
  / 100 % of episodes (design order, so the parts are nested), re-estimated and re-curated
  within B.  Only practice-round episodes choose.  Each set's value (:func:`table17_values`)
  is *evaluated* where the ``subsampled`` baseline played it on the evaluation tasks (its
  episodes, ``baseline/subsampled.parquet``; the default runs it on one ALFWorld setting's
  first run), and *predicted* elsewhere: No playbook's evaluation score plus 100 x the sum of
  the full round's estimates over the set's blocks (the additive model), clipped to 0-100.  The column
  ``value_source`` says which, per row; ``overlap`` is the set's Jaccard overlap with the
  full round's set.
- :func:`split_half` (Table 14 analogue): the evaluation tasks split in half at random, a
  method chooses among its candidates on one half by their evaluation scores there, the
  choice is scored on the other half, then the halves swap; averaged over 50 halvings, for
  RBC (2K+1 candidates) and Best-Full (K+1).  Here, and only here, evaluation episodes
  inform a choice, by the procedure's design; the half that chooses is never the half
  scored.  Ties: the candidate serving fewer tokens, then candidate order (RBC's rule).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

from memtrials.curation import curate, inclusion_matrix
from memtrials.curation.design import DESIGN_COLUMNS
from memtrials.stats.inclusion import ridge_loto
from memtrials.studies.playbook.records import SCORE_COLUMNS, scores

FRACTIONS = (0.25, 0.5, 0.75, 1.0)


def block_tags(record: Mapping[str, Any], lessons: pd.DataFrame) -> pd.DataFrame:
    """Per block of one practice round: tag counts summed over its lessons, the helpful share
    (NaN without tags), the estimate with its with/without interval, and its first lesson."""
    by_id = lessons.set_index(lessons["lesson_id"].astype(str))
    est = {int(e["block"]): e for e in record.get("estimates", [])}
    rows = []
    for b in record.get("block_lessons", []):
        sub = by_id.loc[[i for i in b["lesson_ids"] if i in by_id.index]]
        tags = {c: int(pd.to_numeric(sub[c], errors="coerce").fillna(0).sum()) for c in ("helpful", "harmful",
                                                                                        "neutral")}
        total = sum(tags.values())
        e = est.get(int(b["block"]), {})
        rows.append({"block": int(b["block"]), "lessons": len(b["lesson_ids"]), **tags,
                     "helpful_share": tags["helpful"] / total if total else np.nan,
                     "estimate": e.get("estimate", np.nan), "lo": e.get("lo", np.nan), "hi": e.get("hi", np.nan),
                     "example": b["example"]})
    return pd.DataFrame(rows)


def tags_vs_effects(blocks: pd.DataFrame) -> dict[str, Any]:
    """Spearman correlation of helpful share and estimate over the blocks with tags, and the
    tag-rank percentile of each group's (``run`` column, if any) most harmful block."""
    ok = blocks.dropna(subset=["helpful_share", "estimate"])
    if len(ok) < 3:
        return {"n_blocks": int(len(ok)), "spearman": np.nan, "pvalue": np.nan, "harmful_percentiles": []}
    res = _st.spearmanr(ok["helpful_share"], ok["estimate"])
    pct = []
    for _, grp in ok.groupby(ok["run_key"] if "run_key" in ok.columns else np.zeros(len(ok))):
        worst = grp["estimate"].idxmin()
        if grp.loc[worst, "estimate"] >= 0:
            continue
        rank = grp["helpful_share"].rank(ascending=False, method="average")[worst]  # 1 = most helpful-tagged
        pct.append(float(1 - (rank - 1) / max(len(grp) - 1, 1)))
    return {"n_blocks": int(len(ok)), "spearman": float(res.statistic), "pvalue": float(res.pvalue),
            "harmful_percentiles": pct}


def harmful_blocks(blocks: pd.DataFrame, scores: Mapping[tuple, float]) -> pd.DataFrame:
    """Blocks with a negative estimate in runs whose whole playbook scores below No playbook.

    ``blocks`` has the setting keys, ``run`` and :func:`block_tags`' columns; ``scores`` maps
    ``(*setting, candidate)`` to the evaluation score."""
    keep = []
    for row in blocks.itertuples(index=False):
        key = (row.growth, row.model, row.env, row.variant)
        whole, none = scores.get((*key, f"whole:run{row.run}"), np.nan), scores.get((*key, "none"), np.nan)
        if np.isfinite(whole) and np.isfinite(none) and whole < none and row.estimate < 0:
            keep.append({**row._asdict(), "whole": whole, "none": none})
    cols = [*blocks.columns, "whole", "none"]
    return pd.DataFrame(keep, columns=cols)


def subsampled(design: pd.DataFrame, scores: pd.DataFrame, block_tokens: np.ndarray, *, budget: float,
               rule: str = "skip", fractions: Sequence[float] = FRACTIONS) -> pd.DataFrame:
    """The curated set from the first ``f`` of the practice round, per fraction (module docstring).

    ``scores`` holds ``episode`` and ``score`` of the round's episodes only."""
    m = len(block_tokens)
    joined = design.merge(scores[["episode", "score"]], on="episode", how="inner", validate="one_to_one")
    if len(joined) != len(design):
        raise ValueError("subsampled: every episode of the practice design needs exactly one score")
    joined = joined.sort_values("episode").reset_index(drop=True)
    full_est = None
    rows = []
    for f in sorted(fractions, reverse=True):  # 100 % first: the reference
        n = max(2, int(round(f * len(joined))))
        part = joined.iloc[:n]
        task = part[DESIGN_COLUMNS[1]].to_numpy()
        if m == 0 or len(set(task)) < 2:
            rows.append({"fraction": f, "episodes": n, "blocks": [], "predicted": np.nan, "overlap": np.nan,
                         "episode_ids": part["episode"].tolist()})
            continue
        est = ridge_loto(task, inclusion_matrix(part, m), part["score"].to_numpy(float)).coef
        if full_est is None:
            full_est = est
        cur = curate(est, np.asarray(block_tokens, dtype=np.int64), budget=budget, rule=rule)  # type: ignore[arg-type]
        chosen = set(cur.blocks)
        ref = set(rows[0]["blocks"]) if rows else chosen
        union = chosen | ref
        rows.append({"fraction": f, "episodes": n, "blocks": sorted(chosen),
                     "predicted": float(sum(full_est[j] for j in chosen)),
                     "overlap": len(chosen & ref) / len(union) if union else 1.0,
                     "episode_ids": part["episode"].tolist()})
    return pd.DataFrame(rows).sort_values("fraction").reset_index(drop=True)


def table17_values(sub: pd.DataFrame, run: str, evaluated: pd.DataFrame | None, none_score: float) -> pd.DataFrame:
    """:func:`subsampled`'s rows of one run with ``evaluated`` (0-100, NaN where not played),
    ``predicted_score`` and ``value`` / ``value_source`` (``evaluated`` or ``predicted``).

    ``evaluated``: the ``subsampled`` baseline's evaluation episodes of the setting
    (candidates ``subsampled:f<percent>:<run>``), or None where it did not run."""
    from memtrials.studies.playbook.analysis import method_score
    from memtrials.studies.playbook.baselines import candidate_name

    out = sub.copy()
    names = [candidate_name("subsampled", f"f{int(round(100 * f))}", run) for f in out["fraction"]]
    ev = evaluated if evaluated is not None else pd.DataFrame(columns=["candidate", "task_id", *SCORE_COLUMNS])
    out["evaluated"] = [method_score(ev[ev["candidate"].astype(str) == c]) for c in names]
    out["predicted_score"] = (float(none_score) + 100.0 * out["predicted"].astype(float)).clip(0.0, 100.0)
    played = out["evaluated"].notna()
    out["value"] = out["evaluated"].where(played, out["predicted_score"])
    out["value_source"] = np.where(played, "evaluated", "predicted")
    return out


def _pick(means: pd.Series, tokens: Mapping[str, int], order: Sequence[str]) -> str:
    top = float(means.max())
    tied = [c for c in order if c in means.index and means[c] >= top - 1e-12 * max(abs(top), 1.0)]
    return min(tied, key=lambda c: (tokens.get(c, 0), order.index(c)))


def split_half(evals: pd.DataFrame, candidates: Sequence[str], tokens: Mapping[str, int], *, halvings: int = 50,
               seed: int = 0) -> pd.DataFrame:
    """Choose on one half of the evaluation tasks, score on the other, both ways, per halving.

    ``evals``: one row per evaluation episode with ``candidate``, ``task_id`` and
    :data:`.records.SCORE_COLUMNS` (scored by :func:`.records.scores`).  Each
    row of the result names the tasks that chose and the tasks that scored (disjoint)."""
    ev = evals[evals["candidate"].isin(candidates)]
    tasks = sorted(ev["task_id"].astype(str).unique())
    if len(tasks) < 2:
        raise ValueError(f"split_half: needs at least 2 evaluation tasks, got {len(tasks)}")
    per_task = ev.assign(y=scores(ev)).groupby(["candidate", "task_id"])["y"].mean().unstack()
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(halvings):
        perm = [tasks[i] for i in rng.permutation(len(tasks))]
        halves = (perm[: len(tasks) // 2], perm[len(tasks) // 2:])
        for d, (choose_on, score_on) in enumerate((halves, halves[::-1])):
            chosen = _pick(per_task[choose_on].mean(axis=1), tokens, list(candidates))
            rows.append({"halving": h, "direction": d, "chosen": chosen, "choose_tasks": list(choose_on),
                         "score_tasks": list(score_on), "score": 100.0 * float(per_task.loc[chosen, score_on].mean())})
    return pd.DataFrame(rows)


def figure5(blocks: pd.DataFrame) -> Any:
    """Figure 5 analogue: each ACE block's helpful-tag share against its measured effect.  With
    no block to plot (every playbook empty, or no tag) the axes say so instead of standing blank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = blocks.dropna(subset=["helpful_share", "estimate"])
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    ax.scatter(ok["helpful_share"], ok["estimate"], s=14, color="tab:blue")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlim(-0.05, 1.05)  # a share
    if ok.empty:
        ax.text(0.5, 0.62, "no ACE block with tags and an estimate\n(empty playbooks, or no lesson tagged)",
                transform=ax.transAxes, ha="center", va="center", fontsize=8, color="dimgray")
    ax.set_xlabel("share of helpful tags (growth)")
    ax.set_ylabel("measured block effect (ridge)")
    ax.set_title(f"ACE's tags against measured effects ({len(ok)} blocks)")
    return fig


def _figure5(blocks: pd.DataFrame, paths: Sequence[Any]) -> None:
    import matplotlib.pyplot as plt

    from memtrials.io import save_figure

    fig = figure5(blocks)
    save_figure(fig, paths)
    plt.close(fig)


def write_diagnostics(*, playbooks: Sequence[str], practice: Sequence[str], choice: Sequence[str],
                      evals: Sequence[str], tables_dir: str, figures_dir: str, out_index: str, halvings: int,
                      seed: int, budget: float, rule: str = "skip", subsampled_evals: Sequence[str] = ()) -> None:
    """Every diagnostic table (md, csv, tex, html) and Figure 5 (png, svg), then an index.

    ``subsampled_evals``: the ``subsampled`` baseline's episode tables, where it ran (Table 17's
    evaluated values; elsewhere the values are predicted and labelled so)."""
    from pathlib import Path

    from memtrials.io import atomic_write_text
    from memtrials.report.tables import write_table
    from memtrials.studies.playbook import analysis as an
    from memtrials.studies.playbook.records import final_playbook

    tdir, fdir = Path(tables_dir), Path(figures_dir)
    cands = an.candidate_scores(evals)
    score = {(r.growth, r.model, r.env, r.variant, r.candidate): r.score for r in cands.itertuples(index=False)}
    books = {(*an.setting_of(p), int(an.run_number(p))): p for p in playbooks}
    played = {an.setting_of(p): pd.read_parquet(p, columns=["candidate", "task_id", *SCORE_COLUMNS])
              for p in subsampled_evals}
    blocks, subs = [], []
    for p in practice:
        rec, key = an.read_json(p), an.setting_of(p)
        lessons = final_playbook(books[(*key, int(rec["run"]))])
        bt = block_tags(rec, lessons)
        if len(bt):
            blocks.append(bt.assign(**dict(zip(an.SETTING_KEYS, key)), run=int(rec["run"]),
                                    run_key="/".join([*key, str(rec["run"])])))
        stem = str(p).removesuffix(".json")
        design = pd.read_parquet(stem + ".design.parquet")
        eps = pd.read_parquet(stem + ".parquet")
        sc = pd.DataFrame({"episode": eps["design_episode"].astype(int), "score": scores(eps)})
        tok = np.asarray([b["tokens"] for b in rec["block_lessons"]], dtype=np.int64)
        s = table17_values(subsampled(design, sc, tok, budget=budget, rule=rule), f"run{int(rec['run'])}",
                           played.get(key), score.get((*key, "none"), np.nan))
        subs.append(s.drop(columns=["episode_ids"]).assign(**dict(zip(an.SETTING_KEYS, key)), run=int(rec["run"])))
    bl = pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(
        columns=[*an.SETTING_KEYS, "run", "run_key", "block", "helpful_share", "estimate", "example"])
    ace = bl[bl["variant"].astype(str).str.startswith("ace")] if len(bl) else bl
    corr = tags_vs_effects(ace) if len(ace) else tags_vs_effects(bl)
    summary = pd.DataFrame([{"blocks (ACE, with tags)": corr["n_blocks"], "Spearman": corr["spearman"],
                             "p": corr["pvalue"], "most harmful block's tag percentile (mean)":
                             float(np.mean(corr["harmful_percentiles"])) if corr["harmful_percentiles"] else np.nan}])
    harm = harmful_blocks(bl, score) if len(bl) else bl
    from memtrials.studies.playbook.behaviour import round_rates

    rates = round_rates(practice, an.setting_of, an.SETTING_KEYS, an.read_json)
    if len(rates) and len(harm):  # Table 4's behaviour rate beside each harmful block (a benchmark with a hook)
        harm = harm.merge(rates, on=[*an.SETTING_KEYS, "run", "block"], how="left")
    sub = pd.concat(subs, ignore_index=True) if subs else pd.DataFrame(columns=["fraction"])
    if len(sub):
        sub["blocks"] = sub["blocks"].map(lambda b: ",".join(map(str, b)))
    halves = []
    for p in choice:
        ch, key = an.read_json(p), an.setting_of(p)
        ev = [e for e in evals if an.setting_of(e) == key]
        table = pd.concat([pd.read_parquet(e, columns=["candidate", "task_id", *SCORE_COLUMNS]) for e in ev],
                          ignore_index=True)
        if table["task_id"].nunique() < 2:
            continue
        tok = {c["name"]: int(c["tokens"]) for c in ch["candidates"]}
        head = list(ch["runs"])[:an.headline_k(ch)]  # Table 1's K
        for method, names in (("RBC", [f"{c}:{r}" for c in ("curated", "whole") for r in head] + ["none"]),
                              ("Best-Full", [f"whole:{r}" for r in head] + ["none"])):
            sh = split_half(table, names, tok, halvings=halvings, seed=seed)
            chosen = ch["rbc" if method == "RBC" else "best_full"]["chosen"]
            halves.append({**dict(zip(an.SETTING_KEYS, key)), "method": method,
                           "chosen on practice (Table 1)": score.get((*key, chosen), np.nan),
                           "split-half on evaluation": float(sh["score"].mean()), "halvings": halvings,
                           "none": score.get((*key, "none"), np.nan)})
    tables = {
        "table_tags_vs_effects": (summary, "Figure 5 analogue: ACE's helpful-tag share against the measured block "
                                  "effects (Spearman over blocks), and where each run's most harmful block sits "
                                  "in its tag ranking (1 = most helpful-tagged)."),
        "table_block_tags": (bl.drop(columns=["run_key"], errors="ignore"), "Every block: tags, estimate, interval."),
        "table4_harmful_blocks": (harm.drop(columns=["run_key"], errors="ignore"),
                                  "Table 4 analogue: blocks with a negative estimate in runs whose whole playbook "
                                  "scores below No playbook, with one lesson and the tag share."),
        "table4_behaviour_rates": (rates, "Table 4's behaviour rates: per block of each practice round, how "
                                   "often an episode showed its benchmark's behaviour (AppWorld: an answer passed "
                                   "to complete_task; WebShop, once it runs here: a purchase) with the block "
                                   "included and without it; unadjusted means over practice episodes."),
        "table17_subsampled": (sub, "Table 17 analogue: the curated set from the first 25/50/75/100 % of each "
                               "practice round (practice episodes only choose) and its value on the evaluation "
                               "tasks (0-100): value_source 'evaluated' where the subsampled baseline played it, "
                               "'predicted' elsewhere (No playbook's score + 100 x the full round's estimates "
                               "summed over the set's blocks, clipped to 0-100); overlap (Jaccard) with the "
                               "full round's set."),
        "table14_split_half": (pd.DataFrame(halves), "Table 14 analogue: choosing on half of the evaluation tasks "
                               "and scoring on the other half (both ways, mean over random halvings) against "
                               "choosing on practice tasks; evaluation episodes inform this choice by design."),
    }
    for stem, (df, caption) in tables.items():
        write_table(df, tdir / stem, caption=caption, float_format=lambda x: f"{x:.3f}")
    _figure5(ace if len(ace) else bl, [fdir / "figure5_tags_vs_effects.png", fdir / "figure5_tags_vs_effects.svg"])
    index = ["# Playbook curation: diagnostics", ""] + [f"- [{s}](tables/{s}.md)" for s in tables] + [
        "", "Figure: [Figure 5](figures/figure5_tags_vs_effects.svg)"]
    atomic_write_text(out_index, "\n".join(index) + "\n")
