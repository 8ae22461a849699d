"""Tables and figures of the calibrator (analogues of *When History Fails to Become
Experience* Table 8, Figure 7, Figure 10, Table 9 and the label statistics of section 6.1).

- ``label_stats``: NOUPDATE / CALIBRATE shares of the generator, the screen and both
  targets, the q(E) distribution, pairs tied without a judge call;
- ``figure10_next_action``: improved / degraded next-action rates per recipient actor
  (rates over all completed comparisons, ties included; Appendix D.4);
- ``table9_variants``: the full pipeline's targets against the content-screening-only
  ablation's on the same contexts (the rollout comparison of Table 9 needs both trained
  calibrators served, then it is the ``table8`` of each);
- ``table8_success`` / ``figure7_success``: Raw, Causal Transition (history's cells) and
  Calibrator (this study's cells) success per actor x environment, by actor, by
  environment and pooled, Wilson 95% intervals.  Calibrator rows are labelled by the
  endpoint that played the role, "untrained stand-in" unless it is a checkpoint of the
  training rule (:func:`.rollouts.trained_endpoints`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hindsight.files import atomic_write_text, save_figure  # noqa: E402
from hindsight.report import write_table  # noqa: E402
from hindsight.stats.intervals import wilson_interval  # noqa: E402
from hindsight.studies.history.calibrator.dataset import label_stats  # noqa: E402
from hindsight.studies.history.calibrator.rollouts import calibrator_label, trained_endpoints  # noqa: E402

log = logging.getLogger(__name__)


def next_action_rates(compares: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per recipient actor and overall: comparisons, improved % and degraded % (ties included)."""
    rows = []
    frames = {a: df for a, df in compares.items()}
    frames["Overall"] = pd.concat(list(compares.values())) if compares else pd.DataFrame(columns=["outcome"])
    for actor, df in frames.items():
        n = len(df)
        win, loss = int((df["outcome"] == "win").sum()), int((df["outcome"] == "loss").sum())
        rows.append({"Actor": actor, "Comparisons": n, "Improved (%)": 100 * win / n if n else np.nan,
                     "Degraded (%)": 100 * loss / n if n else np.nan,
                     "Ties without judge": int(df["identical"].astype(bool).sum()) if n else 0})
    return pd.DataFrame(rows)


def success_rows(frames: Mapping[str, pd.DataFrame], labels: Mapping[str, str]) -> pd.DataFrame:
    """Success per (condition, model, environment), per model, per environment and pooled."""
    rows = []
    for cond, df in frames.items():
        if df.empty:
            continue
        groups: list[tuple[str, str, pd.DataFrame]] = [(m, e, g) for (m, e), g in df.groupby(["model", "env"])]
        groups += [(m, "all", g) for m, g in df.groupby("model")]
        groups += [("all", e, g) for e, g in df.groupby("env")]
        groups.append(("all", "all", df))
        for m, e, g in groups:
            k, n = int(g["won"].sum()), len(g)
            ci = wilson_interval(k, n)
            rows.append({"Condition": labels[cond], "Model": m, "Environment": e, "Successes": k, "Episodes": n,
                         "Success (%)": 100 * ci.estimate, "Low (%)": 100 * ci.lo, "High (%)": 100 * ci.hi})
    return pd.DataFrame(rows)


def _read(paths: Sequence[str]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()


def write_report(*, labels: str, compare: Sequence[str], datasets: Sequence[str], sft: Sequence[str],
                 rollouts: Mapping[str, Sequence[str]], calibrator: str | None, joint: Sequence[str] = (),
                 trained: Mapping[str, str], tables_dir: str, figures_dir: str, index_path: str) -> list[str]:
    """Write every table and figure; ``index_path`` lists them."""
    td, fd = Path(tables_dir), Path(figures_dir)
    td.mkdir(parents=True, exist_ok=True)
    fd.mkdir(parents=True, exist_ok=True)
    out: list[str] = []
    lab = pd.read_parquet(labels)
    compares = {Path(p).stem: pd.read_parquet(p) for p in compare}
    stats = label_stats(lab, compares)
    stat_df = pd.DataFrame([{"Statistic": k, "Value": json.dumps(v) if isinstance(v, dict) else v}
                            for k, v in stats.items()])
    out += [str(p) for p in write_table(stat_df, td / "label_stats", caption="Label statistics (section 6.1)")]
    rates = next_action_rates(compares)
    out += [str(p) for p in write_table(rates, td / "figure10_next_action", caption=(
        "Changes in next-action quality with candidate experiences, per recipient actor (Figure 10): rates over all "
        "completed comparisons, ties included"))]
    fig, ax = plt.subplots(figsize=(6, 3))
    x = np.arange(len(rates))
    ax.bar(x - 0.2, rates["Improved (%)"].fillna(0), 0.4, label="Improved")
    ax.bar(x + 0.2, rates["Degraded (%)"].fillna(0), 0.4, label="Degraded")
    ax.set_xticks(x, list(rates["Actor"]), fontsize=7)
    ax.set_ylabel("Next-action comparisons (%)")
    ax.legend(fontsize=7)
    out += [str(p) for p in save_figure(fig, [fd / "figure10_next_action.png", fd / "figure10_next_action.svg"])]
    plt.close(fig)
    var = []
    for p in datasets:
        d = pd.read_parquet(p)
        var.append({"Training data": Path(p).stem, "Examples": len(d),
                    "CALIBRATE": int((d["decision"] == "CALIBRATE").sum()),
                    "NOUPDATE": int((d["decision"] == "NOUPDATE").sum())})
    both = lab.dropna(subset=["target_full", "target_screen_only"])
    caption = ("Training-data ablation (Table 9): targets of the full pipeline and of content screening only on the "
               f"same contexts; they differ on {int((both['target_full'] != both['target_screen_only']).sum())} "
               "contexts. The success comparison needs both trained calibrators served (docs/calibrator.md)")
    out += [str(p) for p in write_table(pd.DataFrame(var), td / "table9_variants", caption=caption)]
    if sft:
        sft_rows = []
        for p in sft:
            m = json.loads(Path(p).read_text(encoding="utf-8"))
            ls = [x["loss"] for x in m["losses"]]
            sft_rows.append({"Variant": Path(p).parent.name, "Base model": m["recipe"]["base_model"],
                             "Examples": m["examples"], "First loss": ls[0] if ls else np.nan,
                             "Last loss": ls[-1] if ls else np.nan, "Digest": m["digest"][:12]})
        out += [str(p) for p in write_table(pd.DataFrame(sft_rows), td / "sft_runs", caption="SFT runs")]
    if rollouts:
        frames = {c: _read(list(ps)) for c, ps in rollouts.items()}
        who = [calibrator] if calibrator else []
        ok = trained_endpoints(trained)
        labels_ = {"raw": "Raw", "causal": "Causal Transition", "calibrator": calibrator_label(who, ok)}
        succ = success_rows(frames, labels_)
        cap = (f"Full-rollout success (Table 8 / Figure 7), Wilson 95% intervals; the Calibrator rows: "
               f"{labels_['calibrator']}")
        out += [str(p) for p in write_table(succ, td / "table8_success", caption=cap)]
        pooled = succ[(succ["Model"] == "all") | (succ["Environment"] == "all")]
        fig, ax = plt.subplots(figsize=(7, 3))
        keys = [f"{r.Model}/{r.Environment}" for r in pooled[pooled["Condition"] == "Raw"].itertuples()]
        width = 0.8 / max(1, len(labels_))
        for i, name in enumerate(labels_.values()):
            sub = pooled[pooled["Condition"] == name].set_index(pooled[pooled["Condition"] == name]
                                                                .apply(lambda r: f"{r.Model}/{r.Environment}", axis=1))
            ax.bar(np.arange(len(keys)) + (i - 1) * width, [sub["Success (%)"].get(k, np.nan) for k in keys], width,
                   label=name)
        ax.set_xticks(np.arange(len(keys)), keys, fontsize=6, rotation=30)
        ax.set_ylabel("Task success (%)")
        ax.legend(fontsize=6)
        out += [str(p) for p in save_figure(fig, [fd / "figure7_success.png", fd / "figure7_success.svg"])]
        plt.close(fig)
    for p in joint:
        n = sum(1 for line in Path(p).read_text(encoding="utf-8").splitlines() if line.strip())
        out.append(f"{p} ({n} examples)")
    lines = ["# Calibrator (section 6): tables and figures", "", f"{len(lab)} contexts; label statistics:", "",
             "```json", json.dumps(stats, indent=1), "```", ""] + [f"- `{p}`" for p in out]
    atomic_write_text(index_path, "\n".join(lines) + "\n")
    log.info("calibrator report: %d files", len(out))
    return out
