"""The calibrator's tables on planted data: Figure 10's improved / degraded rates recover a
planted effect and a null per recipient actor; Table 8's success rates, pools and Wilson
intervals; Calibrator rows labelled by their endpoint as an untrained stand-in unless a
trained checkpoint is declared; the label statistics count what the labels hold."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from memtrials.agent.records import table
from memtrials.io import write_parquet
from memtrials.studies.history.calibrator.dataset import DATASET_SCHEMA
from memtrials.studies.history.calibrator.report import next_action_rates, success_rows, write_report
from memtrials.studies.history.calibrator.schemas import LABEL_SCHEMA


def pairs(rng, n: int, p_win: float, p_loss: float) -> pd.DataFrame:
    u = rng.random(n)
    out = np.where(u < p_win, "win", np.where(u < p_win + p_loss, "loss", "tie"))
    ident = (out == "tie") & (rng.random(n) < 0.5)
    return pd.DataFrame({"outcome": out, "identical": ident})


def test_figure10_rates_recover_a_planted_effect_and_a_null():
    rng = np.random.default_rng(0)
    r = next_action_rates({"helped": pairs(rng, 4000, 0.30, 0.10), "null": pairs(rng, 4000, 0.15, 0.15)})
    r = r.set_index("Actor")
    assert abs(r.loc["helped", "Improved (%)"] - 30) < 2 and abs(r.loc["helped", "Degraded (%)"] - 10) < 2
    assert abs(r.loc["null", "Improved (%)"] - r.loc["null", "Degraded (%)"]) < 3
    assert r.loc["Overall", "Comparisons"] == 8000
    assert abs(r.loc["Overall", "Improved (%)"] - 22.5) < 2


def test_success_rows_pool_by_actor_environment_and_overall():
    df = pd.DataFrame({"model": ["a", "a", "b", "b"], "env": ["x", "y", "x", "y"], "won": [1, 0, 1, 1]})
    s = success_rows({"raw": df}, {"raw": "Raw"}).set_index(["Model", "Environment"])
    assert s.loc[("all", "all"), "Successes"] == 3 and s.loc[("all", "all"), "Episodes"] == 4
    assert s.loc[("a", "all"), "Success (%)"] == 50 and s.loc[("all", "x"), "Success (%)"] == 100
    assert s.loc[("all", "x"), "High (%)"] == 100 and s.loc[("all", "x"), "Low (%)"] < 100


def test_report_labels_the_calibrator_rows_and_counts_the_labels(tmp_path):
    rows = [{"context_id": f"c{i}", "source_model": "a", "env": "x", "task_id": f"train-{i}", "decision": d,
             "experience": e,
             "screened": s, "screen_passed": p, "n_actors": n, "n_up": u, "n_down": dn, "n_tie": n - u - dn,
             "n_tie_no_judge": 0, "q": q, "target_full": tf, "target_screen_only": ts}
            for i, (d, e, s, p, n, u, dn, q, tf, ts) in enumerate([
                ("NOUPDATE", None, False, False, 0, 0, 0, None, "NOUPDATE", "NOUPDATE"),
                ("CALIBRATE", "E1", True, False, 0, 0, 0, None, "NOUPDATE", "NOUPDATE"),
                ("CALIBRATE", "E2", True, True, 1, 1, 0, 1, "CALIBRATE", "CALIBRATE"),
                ("CALIBRATE", "E3", True, True, 1, 0, 1, -1, "NOUPDATE", "CALIBRATE"),
                ("INVALID", None, False, False, 0, 0, 0, None, None, None)])]
    write_parquet(table(rows, LABEL_SCHEMA), tmp_path / "labels.parquet")
    pd.DataFrame({"context_id": ["c2", "c3"], "outcome": ["win", "loss"], "identical": [False, False]}) \
        .to_parquet(tmp_path / "a.parquet")
    for v, ds in (("full", ["NOUPDATE", "NOUPDATE", "CALIBRATE", "NOUPDATE"]),
                  ("screen_only", ["NOUPDATE", "NOUPDATE", "CALIBRATE", "CALIBRATE"])):
        write_parquet(table([{"context_id": f"c{i}", "env": "x", "task_id": f"train-{i}", "variant": v,
                              "decision": d, "target": "{}", "prompt": "[]"}
                             for i, d in enumerate(ds)], DATASET_SCHEMA), tmp_path / f"{v}.parquet")
    roll = {}
    for c, won in (("raw", [0, 1]), ("causal", [1, 1]), ("calibrator", [1, 0])):
        p = tmp_path / f"{c}.ep.parquet"
        pd.DataFrame({"model": ["a", "a"], "env": ["x", "y"], "task_id": ["eval-0", "eval-1"], "won": won}) \
            .to_parquet(p)
        roll[c] = [str(p)]
    kw = dict(labels=str(tmp_path / "labels.parquet"), compare=[str(tmp_path / "a.parquet")],
              datasets=[str(tmp_path / "full.parquet"), str(tmp_path / "screen_only.parquet")], sft=[],
              rollouts=roll, calibrator="smollm2", trained={}, tables_dir=str(tmp_path / "t"),
              figures_dir=str(tmp_path / "f"), index_path=str(tmp_path / "t/index.md"))
    write_report(**kw)
    assert ("training and evaluation tasks disjoint: 5 training task(s) in 3 file(s), 2 evaluation task(s) in 3 "
            "file(s)") in (tmp_path / "t/index.md").read_text()
    t8 = pd.read_csv(tmp_path / "t/table8_success.csv")
    assert set(t8["Condition"]) == {"Raw", "Causal Transition", "Calibrator (untrained stand-in: smollm2)"}
    assert "untrained stand-in: smollm2" in (tmp_path / "t/table8_success.md").read_text()
    stats = pd.read_csv(tmp_path / "t/label_stats.csv").set_index("Statistic")["Value"]
    assert stats["generator_noupdate"] == "1" and stats["generator_invalid"] == "1"
    assert stats["screen_failed"] == "1" and stats["full_calibrate"] == "1" and stats["screen_only_calibrate"] == "2"
    assert json.loads(stats["q_distribution"]) == {"-1": 1, "1": 1}
    assert "differ on 1 contexts" in (tmp_path / "t/table9_variants.md").read_text()
    for f in ("figure10_next_action.png", "figure7_success.png"):
        assert (tmp_path / "f" / f).stat().st_size > 1000


def test_history_continuation_tables_name_a_trained_calibrator():
    from memtrials.studies.history.report import continuation_labels

    cont = pd.DataFrame({"condition": ["raw", "calibrator", "calibrator-chat"], "calibrator": [None, "cal", "cal"]})
    labels, note = continuation_labels(cont, trained={"cal": {"digest": "d", "label": "Qwen3-8B", "examples": 9}})
    assert labels["calibrator"] == "Calibrator (trained: Qwen3-8B on 9 examples)"
    assert labels["calibrator-chat"] == "Calibrator (trained: Qwen3-8B on 9 examples) (chat)"
    assert "learned calibrator served by cal" in note
    labels, note = continuation_labels(cont)
    assert labels["calibrator"] == "Calibrator (untrained stand-in: cal)" and "untrained stand-in" in note


def test_figure9_recovers_planted_seed_means_and_spread_and_a_null():
    from memtrials.studies.history.calibrator.report import arm_rows

    rng = np.random.default_rng(1)

    def arm(p_seeds, n=3000):
        return pd.DataFrame([{"model": f"s{k}", "env": e, "won": bool(w)} for k, p in enumerate(p_seeds)
                             for e in ("x", "y") for w in rng.random(n) < p])
    planted = {"joint": [0.50, 0.55, 0.60, 0.65, 0.70], "action_only": [0.40] * 5}
    rows = arm_rows({a: arm(p) for a, p in planted.items()}, {"joint": "J", "action_only": "A"})
    r = rows.set_index(["Arm", "Environment"])
    assert abs(r.loc[("J", "all"), "Mean success (%)"] - 60) < 1.5 and r.loc[("J", "x"), "Endpoints"] == 5
    assert abs(r.loc[("J", "x"), "SD (%)"] - 100 * np.std(planted["joint"], ddof=1)) < 2
    assert r.loc[("A", "all"), "SD (%)"] < 2 and abs(r.loc[("A", "y"), "Mean success (%)"] - 40) < 2
    null = arm_rows({"joint": arm([0.3] * 5), "action_only": arm([0.3] * 5)}, {"joint": "J", "action_only": "A"})
    n = null.set_index(["Arm", "Environment"])["Mean success (%)"]
    assert abs(n[("J", "all")] - n[("A", "all")]) < 1.5
    one = arm_rows({"joint": arm([0.5])}, {"joint": "J"})
    assert one["SD (%)"].isna().all()     # one endpoint: no spread to show


def _fake_checkpoint(folder, dataset):
    from memtrials.studies.history.calibrator.rollouts import checkpoint_digest

    ck = folder / "checkpoint"
    ck.mkdir(parents=True)
    (ck / "model.safetensors").write_bytes(b"weights")
    (folder / "memtrials-sft.json").write_text(json.dumps({
        "trained_by": "calibrator_sft", "checkpoint": "checkpoint", "digest": checkpoint_digest(ck),
        "dataset": f"results/calibrator/dataset/{dataset}.jsonl"}))
    return str(folder)


def test_table9_success_and_figure9_label_their_endpoints(tmp_path):
    from memtrials.studies.history.calibrator.report import _ablation_and_joint, ablation_caption

    def ep(path, model, won):
        pd.DataFrame({"model": model, "env": ["x"] * len(won), "won": won}).to_parquet(path)
        return [str(path)]
    ablation = {"full": ep(tmp_path / "f.parquet", ["a"] * 4, [1, 1, 1, 0]),
                "screen_only": ep(tmp_path / "s.parquet", ["a"] * 4, [1, 0, 0, 0])}
    arms = {"joint": ep(tmp_path / "j.parquet", ["m"] * 2, [1, 0]),
            "action_only": ep(tmp_path / "o.parquet", ["m"] * 2, [0, 0])}
    (tmp_path / "t").mkdir()
    (tmp_path / "f").mkdir()
    _ablation_and_joint(tmp_path / "t", tmp_path / "f", ablation, {"full": "cal", "screen_only": "cal"}, arms, {}, {})
    t9 = pd.read_csv(tmp_path / "t/table9_success.csv").set_index(["Condition", "Model", "Environment"])
    assert t9.loc[("Full Calibrator (untrained stand-in: cal)", "all", "all"), "Successes"] == 3
    assert t9.loc[("Content screening only (untrained stand-in: cal)", "a", "x"), "Successes"] == 1
    text = (tmp_path / "t/table9_success.md").read_text()
    assert "same endpoint (cal)" in text and "untrained stand-in for full, screen_only" in text
    f9 = pd.read_csv(tmp_path / "t/figure9_joint.csv").set_index(["Arm", "Environment"])
    assert f9.loc[("Calibration + action (untrained stand-in: m)", "x"), "Mean success (%)"] == 50
    assert f9.loc[("Action only (untrained stand-in: m)", "all"), "Mean success (%)"] == 0
    assert (tmp_path / "f/figure9_joint.png").stat().st_size > 1000
    # two trained checkpoints: no stand-in; one trained on the other variant's labels is named
    declared = {"cal": _fake_checkpoint(tmp_path / "ck_full", "full"),
                "cal-so": _fake_checkpoint(tmp_path / "ck_so", "full")}
    from memtrials.studies.history.calibrator.rollouts import trained_endpoints

    ok = trained_endpoints(declared)
    cap = ablation_caption({"full": "cal", "screen_only": "cal-so"}, declared, ok)
    assert "stand-in" not in cap and "same endpoint" not in cap
    assert "the screen_only endpoint cal-so was trained on the full dataset" in cap
