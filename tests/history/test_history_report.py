"""Analysis and report of the history study on cell-shaped tables with planted effects."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memtrials.agent.records import EPISODE_SCHEMA, STEP_SCHEMA
from memtrials.io import write_parquet
from memtrials.studies.history import analysis as A
from memtrials.studies.history.continuation import continuation_schema
from memtrials.studies.history.report import write_report

MODELS, ENVS = ["m1", "m2"], ["alfworld", "scienceworld"]


def episodes(condition: str, p: dict[tuple[str, str], float], n: int, rng, extra=None) -> pd.DataFrame:
    rows = []
    for (m, e), q in p.items():
        for i in range(n):
            row = {c: None for c in EPISODE_SCHEMA.names}
            row.update(episode_id=f"history/rollouts/{m}/{e}/{condition}/t{i}", model=m, env=e, condition=condition,
                       task_id=f"t{i}", task_index=i, seed=i, task="x", initial_observation="o",
                       won=bool(rng.random() < q), n_steps=5, final_score=0.0, termination="budget",
                       n_unparsable=0, n_inadmissible=0, n_reviews=0, n_experiences=0, n_noupdate=0,
                       n_review_invalid=0, first_prompt_tokens=int(500 + 10 * i), first_prompt_approx_tokens=400,
                       prompt_tokens=1000, completion_tokens=50)
            if extra:
                row.update(extra(m, e, i))
            rows.append(row)
    return pd.DataFrame(rows)


def steps_for(eps: pd.DataFrame, decisions: list[str | None]) -> pd.DataFrame:
    rows = []
    for _, ep in eps.iterrows():
        for k, d in enumerate(decisions):
            row = {c: None for c in STEP_SCHEMA.names}
            row.update(episode_id=ep["episode_id"], task_id=ep["task_id"], step=k + 1, review_decision=d,
                       experience="E" if d == "CALIBRATE" else None)
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture
def cells(tmp_path):
    rng = np.random.default_rng(0)
    base = {(m, e): 0.3 for m in MODELS for e in ENVS}
    paths = []
    # a correlated design: causal flips 10% of raw failures to success on the same tasks
    raw = episodes("raw", base, 60, rng)
    causal = raw.assign(condition="causal", episode_id=raw["episode_id"].str.replace("/raw/", "/causal/"))
    flip = rng.random(len(raw)) < 0.15
    causal["won"] = raw["won"] | flip
    exp = raw.assign(condition="experience", episode_id=raw["episode_id"].str.replace("/raw/", "/experience/"))
    for name, df in (("raw", raw), ("causal", causal), ("experience", exp),
                     ("recent3", episodes("recent3", base, 60, rng)), ("raw-chat", episodes("raw-chat", base, 60, rng))):
        p = tmp_path / f"{name}.parquet"
        write_parquet(pd.DataFrame(df)[EPISODE_SCHEMA.names], p, schema=EPISODE_SCHEMA)
        decisions = ["CALIBRATE", "NOUPDATE", "INVALID", None] if name == "experience" else [None]
        write_parquet(steps_for(df, decisions)[STEP_SCHEMA.names], tmp_path / f"{name}.steps.parquet", schema=STEP_SCHEMA)
        paths.append(str(p))
    cont_paths = []
    for cond, q in (("raw", 0.3), ("reference", 0.2), ("causal_reference", 0.35), ("calibrator", 0.3)):
        df = episodes(cond, {k: q for k in base}, 20, rng, extra=lambda m, e, i, c=cond: {
            "source_episode_id": f"history/rollouts/{m}/{e}/raw/t{i}", "source_length": 9, "restored_step": 3,
            "reference_end": 6, "resume_review_call_id": None, "resume_experience": None,
            "calibrator": "smollm2" if c == "calibrator" else None})
        if cond != "raw":
            df["first_prompt_tokens"] += 300
        p = tmp_path / f"cont_{cond}.parquet"
        write_parquet(df[continuation_schema().names], p, schema=continuation_schema())
        cont_paths.append(str(p))
    probe = pd.DataFrame([{"model": m, "env": "alfworld", "episode_id": f"{m}/e{i}", "condition": c,
                           "repeated": bool(rng.random() < {"raw": 0.5, "causal": 0.4, "experience": 0.2}[c])}
                          for m in MODELS for i in range(30) for c in ("raw", "causal", "experience")])
    write_parquet(probe, tmp_path / "probe.parquet")
    return tmp_path, paths, cont_paths, [str(tmp_path / "probe.parquet")], raw, causal


def test_counts_and_paired_difference_follow_the_cells(cells):
    tmp, paths, *_, raw, causal = cells
    eps = A.load(paths)
    table = A.count_table(eps[eps["condition"].isin(["raw", "causal"])], ["raw", "causal"], {"raw": "Raw", "causal": "C"})
    row = table[(table["Model"] == "m1") & (table["Environment"] == "alfworld")].iloc[0]
    sub = raw[(raw["model"] == "m1") & (raw["env"] == "alfworld")]
    assert row["Raw"] == f"{int(sub['won'].sum())}/60"
    d = A.paired_vs(eps, "raw", "causal", A.EPISODE_KEY).iloc[0]
    assert d["diff"] == pytest.approx(causal["won"].mean() - raw["won"].mean())
    assert d["base_only"] == 0 and d["other_only"] == int((causal["won"] & ~raw["won"]).sum())
    assert d["lo"] > 0 and d["p_mcnemar"] < 0.001           # the planted gain is found
    same = A.paired_vs(eps, "raw", "experience", A.EPISODE_KEY).iloc[0]
    assert same["diff"] == 0 and same["p_mcnemar"] == 1.0   # identical outcomes: no change


def test_experience_rates_count_valid_reviews_only(cells):
    tmp, paths, *_ = cells
    steps = A.load([str(tmp / "experience.steps.parquet")])
    eps = A.load([str(tmp / "experience.parquet")])
    steps = steps.merge(eps[["episode_id", "model", "env"]], on="episode_id")
    t = A.experience_rates(steps)
    overall = t[t["Model"] == "Overall"].iloc[0]
    n_eps = len(eps)
    assert overall["Reviews"] == 3 * n_eps and overall["Valid reviews"] == 2 * n_eps
    assert overall["Experience"].startswith(f"{n_eps} (50.0")


def test_report_writes_every_table_and_figure(cells):
    tmp, paths, cont, probe, *_ = cells
    entries = write_report(paths, cont, probe, {"n_boot": 500}, str(tmp / "tables"), str(tmp / "figures"),
                           str(tmp / "tables" / "index.md"))
    names = {p.split("/")[1].split(".")[0] for p, _ in entries}
    for n in ("table2_success", "table4_counts", "table5_check", "table_paired_rollouts", "table6_experience_rates",
              "table10_chat_counts", "table_recovery", "table_recovery_paired_vs_raw", "table3_repetition",
              "figure2_recovery", "figure3_prompt_lengths", "figure4_change_from_raw", "figure5_repetition",
              "figure8_recovery_conditions"):
        assert n in names, n
    for ext in ("md", "csv", "tex", "html"):
        assert (tmp / "tables" / f"table2_success.{ext}").stat().st_size > 0
    for ext in ("png", "svg"):
        assert (tmp / "figures" / f"figure4_change_from_raw.{ext}").stat().st_size > 1000
    t3 = pd.read_csv(tmp / "tables" / "table3_repetition.csv")
    assert list(t3["N"]) == [30, 30, 60]
    index = (tmp / "tables" / "index.md").read_text()
    assert "figure5_repetition" in index


def test_report_states_empty_parts(tmp_path):
    write_report([], [], [], {"n_boot": 200}, str(tmp_path / "t"), str(tmp_path / "f"), str(tmp_path / "t" / "index.md"))
    assert "no rollout episodes" in (tmp_path / "t" / "table2_success.md").read_text()
    assert "no screened repeat pair" in (tmp_path / "t" / "table3_repetition.md").read_text()


def test_bars_accept_rates_at_zero_and_one():
    import matplotlib.pyplot as plt

    from memtrials.studies.history.report import _bars

    fig, ax = plt.subplots()
    _bars(ax, ["a", "b", "c"], {"x": [A.rate(0, 7), A.rate(7, 7), A.rate(0, 0)]}, "rate")
    plt.close(fig)


def test_calibrator_rows_name_the_endpoint_and_say_it_is_an_untrained_stand_in(cells, monkeypatch):
    from memtrials.studies.history import report as R

    ticks: dict[str, list[str]] = {}
    save = R.Report.figure

    def figure(self, name, fig, caption):
        ticks[name] = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
        save(self, name, fig, caption)

    monkeypatch.setattr(R.Report, "figure", figure)
    tmp, paths, cont, probe, *_ = cells
    write_report(paths, cont, probe, {"n_boot": 200}, str(tmp / "tables"), str(tmp / "figures"),
                 str(tmp / "tables" / "index.md"))
    label = "Calibrator (untrained stand-in: smollm2)"
    assert label in set(pd.read_csv(tmp / "tables" / "table_recovery.csv")["Condition"])
    assert "Calibrator" not in set(pd.read_csv(tmp / "tables" / "table_recovery.csv")["Condition"])
    for name in ("table_recovery_paired_vs_raw", "table_recovery_paired_vs_reference"):
        assert label in (tmp / "tables" / f"{name}.md").read_text()
    assert label.replace(" (", "\n(", 1) in ticks["figure8_recovery_conditions"]
    index = (tmp / "tables" / "index.md").read_text()
    for name in ("table_recovery", "table_recovery_paired_vs_raw", "figure8_recovery_conditions"):
        line = next(x for x in index.splitlines() if f"/{name}." in x)
        assert "played by smollm2, an untrained stand-in" in line, line
    assert "stand-in" not in next(x for x in index.splitlines() if "/table2_success." in x)


def test_calibrator_label_rules():
    from memtrials.studies.history.calibrator.rollouts import calibrator_label

    assert calibrator_label(["qwen3-8b-calibrator"], {}) == "Calibrator (untrained stand-in: qwen3-8b-calibrator)"
    assert calibrator_label([], {}) == "Calibrator (untrained stand-in: endpoint not recorded)"
    ok = {"cal": {"digest": "d", "label": "SmolLM2-135M", "examples": 7}}
    assert calibrator_label(["cal"], ok) == "Calibrator (trained: SmolLM2-135M on 7 examples)"
    assert calibrator_label(["cal", "other"], ok) == "Calibrator (untrained stand-in: cal, other)"

