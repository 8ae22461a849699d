"""The diagnostics on synthetic artifacts: tags against planted effects, harmful blocks only
where the whole playbook harms, subsampled rounds that read nested practice episodes only,
and a split-half check whose choosing half never is the half it scores."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from memtrials.curation import curate, practice_round
from memtrials.studies.playbook import diagnostics as dg


def _record(est):
    return {"run": 1, "estimates": [{"block": j, "estimate": e, "lo": e - 0.1, "hi": e + 0.1} for j, e in enumerate(est)],
            "block_lessons": [{"block": j, "lesson_ids": [f"L{2 * j}", f"L{2 * j + 1}"], "tokens": 10,
                               "example": f"lesson {2 * j}"} for j in range(len(est))]}


def _lessons(helpful, harmful):
    n = len(helpful)
    return pd.DataFrame({"lesson_id": [f"L{i}" for i in range(n)], "text": [f"lesson {i}" for i in range(n)],
                         "tokens": 5, "helpful": helpful, "harmful": harmful, "neutral": [0] * n})


def test_tags_against_planted_effects_and_the_harmful_blocks_rank():
    # block 3 harms most but carries the most helpful tags (the paper's finding, planted)
    est = [0.10, 0.05, -0.02, -0.30]
    lessons = _lessons([3, 3, 2, 2, 1, 1, 9, 9], [1, 1, 2, 2, 3, 3, 0, 0])
    bt = dg.block_tags(_record(est), lessons)
    assert list(bt["helpful_share"]) == pytest.approx([0.75, 0.5, 0.25, 1.0])
    out = dg.tags_vs_effects(bt)
    assert out["spearman"] == pytest.approx(st.spearmanr(bt["helpful_share"], bt["estimate"]).statistic)
    assert out["harmful_percentiles"] == [1.0]  # the most harmful block is the most helpful-tagged
    key = {"growth": "std", "model": "m", "env": "e", "variant": "ace-passfail", "run": 1}
    rows = bt.assign(**key)
    harms = dg.harmful_blocks(rows, {("std", "m", "e", "ace-passfail", "whole:run1"): 20.0,
                                     ("std", "m", "e", "ace-passfail", "none"): 50.0})
    assert list(harms["block"]) == [2, 3] and harms["example"].tolist() == ["lesson 4", "lesson 6"]
    helps = dg.harmful_blocks(rows, {("std", "m", "e", "ace-passfail", "whole:run1"): 60.0,
                                     ("std", "m", "e", "ace-passfail", "none"): 50.0})
    assert helps.empty  # the whole playbook does not harm: no block is listed


def test_subsampled_rounds_read_nested_practice_episodes_only():
    m = 3
    design = practice_round(["t1", "t2", "t3", "t4"], 200, m, seed=4)
    z = design[[f"z{j}" for j in range(m)]].to_numpy()
    rng = np.random.default_rng(0)
    scores = pd.DataFrame({"episode": design["episode"],
                           "score": (rng.random(len(design)) < 0.3 + 0.5 * z[:, 0] - 0.2 * z[:, 2]).astype(float)})
    tok = np.array([10, 10, 10])
    out = dg.subsampled(design, scores, tok, budget=0.4)
    assert list(out["fraction"]) == [0.25, 0.5, 0.75, 1.0] and list(out["episodes"]) == [50, 100, 150, 200]
    used = [set(x) for x in out["episode_ids"]]
    assert all(a < b for a, b in zip(used, used[1:])) and used[-1] == set(design["episode"])
    assert out.iloc[-1]["blocks"] == [0] and out.iloc[-1]["overlap"] == 1.0
    from memtrials.stats.inclusion import ridge_loto
    full = ridge_loto(design["task_id"], z, scores["score"]).coef
    assert out.iloc[-1]["blocks"] == sorted(curate(full, tok, budget=0.4).blocks)
    with pytest.raises(ValueError, match="exactly one score"):
        dg.subsampled(design, scores.iloc[:-3], tok, budget=0.4)


def test_split_half_chooses_on_one_half_and_scores_the_other():
    tasks = [f"t{i}" for i in range(10)]
    # candidate a wins the even tasks, b the odd ones, none nothing
    rows = [{"candidate": c, "task_id": t, "won": (c == "a") == (i % 2 == 0) and c != "none"}
            for c in ("a", "b", "none") for i, t in enumerate(tasks)]
    ev = pd.DataFrame(rows)
    tok = {"a": 5, "b": 5, "none": 0}
    out = dg.split_half(ev, ["a", "b", "none"], tok, halvings=20, seed=3)
    assert len(out) == 40
    for r in out.itertuples():
        assert not set(r.choose_tasks) & set(r.score_tasks) and sorted(r.choose_tasks + r.score_tasks) == tasks
        evens = sum(int(t[1:]) % 2 == 0 for t in r.choose_tasks)
        odds = len(r.choose_tasks) - evens
        assert r.chosen == ("a" if evens >= odds else "b")  # the choosing half decides (tie: order)
        won = ev[(ev["candidate"] == r.chosen) & ev["task_id"].isin(r.score_tasks)]["won"].mean()
        assert r.score == pytest.approx(100 * won)
    # flipping outcomes on a scored half never changes the choice made on the other half
    flipped = ev.copy()
    first = out.iloc[0]
    mask = flipped["task_id"].isin(first.score_tasks)
    flipped.loc[mask, "won"] = ~flipped.loc[mask, "won"].astype(bool)
    again = dg.split_half(flipped, ["a", "b", "none"], tok, halvings=20, seed=3)
    assert again.iloc[0]["chosen"] == first.chosen


def _write(tmp_path, flip_eval: bool = False):
    """A setting's artifacts (two runs, every candidate evaluated, the subsampled baseline on run 1)
    and the diagnostics written from them; ``flip_eval``: every evaluation outcome reversed."""
    from tests.playbook.test_baselines import _setting

    playbooks, practice, choice = _setting(tmp_path)
    base = tmp_path / "results/playbook/std/loop/alfworld/ace-passfail"
    for k, p in enumerate(practice, 1):
        rec = {**_record([0.2, -0.1, 0.05]), "run": k}
        rec["block_lessons"] = [{"block": j, "lesson_ids": [f"L{2 * j:02d}", f"L{2 * j + 1:02d}"], "tokens": 10,
                                 "example": "x"} for j in range(3)]
        (tmp_path / p).write_text(json.dumps(rec))
    names = ["curated:run1", "curated:run2", "whole:run1", "whole:run2", "none"]
    evals = []
    for c in names:
        path = base / f"eval/{c.replace(':', '-')}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        won = [(c != "whole:run1") != flip_eval] * 4
        pd.DataFrame({"candidate": c, "task_id": [f"t{i}" for i in range(4)], "won": won, "env": "alfworld",
                      "final_score": [float(w) for w in won], "served_tokens": 0, "prompt_tokens": 1, "completion_tokens": 1}).to_parquet(path)
        evals.append(str(path))
    ch = {**choice, "candidates": [{"name": c, "tokens": 1} for c in names], "rbc": {"chosen": "curated:run1"}}
    (base / "choice.json").write_text(json.dumps(ch))
    # the subsampled baseline played run 1's four sets (f25 wins 1 of 4 tasks, ..., f100 all 4); run 2 not
    played = pd.DataFrame([{"candidate": f"subsampled:f{f}:run1", "task_id": f"t{i}", "won": (i < k) != flip_eval,
                            "env": "alfworld", "final_score": float((i < k) != flip_eval)}
                           for k, f in enumerate((25, 50, 75, 100), 1) for i in range(4)])
    (base / "baseline").mkdir()
    played.to_parquet(base / "baseline/subsampled.parquet")
    out = tmp_path / "diag"
    dg.write_diagnostics(playbooks=playbooks, practice=practice, choice=[str(base / "choice.json")], evals=evals,
                         tables_dir=str(out / "tables"), figures_dir=str(out / "figures"),
                         out_index=str(out / "index.md"), halvings=5, seed=0, budget=0.4,
                         subsampled_evals=[str(base / "baseline/subsampled.parquet")])
    return out


def test_write_diagnostics_writes_every_table_and_figure_five(tmp_path):
    out = _write(tmp_path)
    for stem in ("table_tags_vs_effects", "table4_harmful_blocks", "table17_subsampled", "table14_split_half"):
        assert (out / "tables" / f"{stem}.csv").exists() and (out / "tables" / f"{stem}.html").exists()
    assert (out / "figures/figure5_tags_vs_effects.png").stat().st_size > 0
    harm = pd.read_csv(out / "tables/table4_harmful_blocks.csv")
    assert set(harm["run"]) == {1} and list(harm["block"]) == [1]  # only run 1's whole playbook harms
    half = pd.read_csv(out / "tables/table14_split_half.csv").set_index("method")
    assert half.loc["RBC", "split-half on evaluation"] == 100.0
    t17 = pd.read_csv(out / "tables/table17_subsampled.csv")
    one, two = t17[t17["run"] == 1].sort_values("fraction"), t17[t17["run"] == 2]
    assert one["value_source"].tolist() == ["evaluated"] * 4 and one["value"].tolist() == [25.0, 50.0, 75.0, 100.0]
    assert two["value_source"].tolist() == ["predicted"] * 4 and two["evaluated"].isna().all()
    # predicted: No playbook's evaluation score (100 here) + 100 x the full round's estimates over the set, in 0-100
    assert two["value"].tolist() == pytest.approx(np.clip(100.0 + 100.0 * two["predicted"], 0, 100).tolist())


def test_table17_values_label_each_row_and_read_only_its_own_candidate():
    sub = pd.DataFrame({"fraction": [0.5, 1.0], "predicted": [0.1, 0.2]})
    ev = pd.DataFrame({"candidate": ["subsampled:f100:run1", "subsampled:f100:run2", "subsampled:f50:run2"],
                       "task_id": ["t1", "t1", "t1"], "won": [True, False, False]})
    out = dg.table17_values(sub, "run1", ev, none_score=40.0)
    assert out["value_source"].tolist() == ["predicted", "evaluated"]  # run 2's f50 is not run 1's
    assert out["value"].tolist() == pytest.approx([50.0, 100.0])
    alone = dg.table17_values(sub, "run1", None, none_score=float("nan"))
    assert alone["value_source"].tolist() == ["predicted"] * 2 and alone["value"].isna().all()


def test_subsampled_choices_read_no_evaluation_episode(tmp_path):
    """Table 17's sets are chosen on practice episodes only: on the first f of the round (what
    follows in the round changes nothing), and reversing every evaluation outcome changes their
    values, never which blocks they keep."""
    m = 3
    design = practice_round(["t1", "t2", "t3", "t4"], 200, m, seed=4)
    z = design[[f"z{j}" for j in range(m)]].to_numpy()
    rng = np.random.default_rng(1)
    y = (rng.random(len(design)) < 0.3 + 0.5 * z[:, 0] - 0.2 * z[:, 2]).astype(float)
    scores = pd.DataFrame({"episode": design["episode"], "score": y})
    later = scores.copy()
    later.loc[later["episode"] >= 50, "score"] = 1 - later.loc[later["episode"] >= 50, "score"]
    tok = np.array([10, 10, 10])
    a, b = dg.subsampled(design, scores, tok, budget=0.4), dg.subsampled(design, later, tok, budget=0.4)
    assert a.iloc[0]["blocks"] == b.iloc[0]["blocks"] and a.iloc[0]["episode_ids"] == list(range(50))
    assert a.iloc[-1]["blocks"] != b.iloc[-1]["blocks"]  # the check can fail: the full round did read them
    same = pd.read_csv(_write(tmp_path / "a") / "tables/table17_subsampled.csv")
    flipped = pd.read_csv(_write(tmp_path / "b", flip_eval=True) / "tables/table17_subsampled.csv")
    assert same["blocks"].astype(str).tolist() == flipped["blocks"].astype(str).tolist()
    assert same["blocks"].notna().any()
    played = same["value_source"] == "evaluated"
    assert played.sum() == 4 and (flipped.loc[played, "value"] == 100 - same.loc[played, "value"]).all()
    assert not same["value"].equals(flipped["value"])


def test_figure5_says_so_when_there_is_no_block_to_plot():
    import matplotlib.pyplot as plt

    empty = pd.DataFrame({"helpful_share": pd.Series([], dtype=float), "estimate": pd.Series([], dtype=float)})
    fig = dg.figure5(empty)
    ax = fig.axes[0]
    assert "(0 blocks)" in ax.get_title() and any("no ACE block" in t.get_text() for t in ax.texts)
    plt.close(fig)
    fig = dg.figure5(pd.DataFrame({"helpful_share": [0.2, 0.8], "estimate": [-0.1, 0.3]}))
    assert "(2 blocks)" in fig.axes[0].get_title() and not fig.axes[0].texts
    plt.close(fig)
