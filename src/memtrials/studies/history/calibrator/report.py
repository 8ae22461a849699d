"""Tables and figures of the calibrator (analogues of *When History Fails to Become
Experience* Table 8, Figure 7, Figure 10, Table 9 and the label statistics of section 6.1).

- ``label_stats``: NOUPDATE / CALIBRATE shares of the generator, the screen and both
  targets, the q(E) distribution, pairs tied without a judge call;
- ``figure10_next_action``: improved / degraded next-action rates per recipient actor
  (rates over all completed comparisons, ties included; Appendix D.4);
- ``table9_variants``: the full pipeline's targets against the content-screening-only
  ablation's on the same contexts;
- ``table9_success``: Table 9 itself, success of the Calibrator rollouts with the calibrator
  trained on each variant's labels (``calibrator.ablation.endpoints``), per actor x
  environment and pooled, each row labelled by its endpoint;
- ``figure9_joint``: Figure 9, the joint actor (calibration + action) against the action-only
  baseline per environment: mean and SD of success across the arm's endpoints (one per
  training seed);
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

from memtrials.io import atomic_write_text, save_figure  # noqa: E402
from memtrials.report import write_table  # noqa: E402
from memtrials.stats.intervals import wilson_interval  # noqa: E402
from memtrials.studies.history.calibrator.dataset import label_stats  # noqa: E402
from memtrials.studies.history.calibrator.leakage import check_disjoint  # noqa: E402
from memtrials.studies.history.calibrator.rollouts import calibrator_label, trained_endpoints  # noqa: E402

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


def arm_rows(frames: Mapping[str, pd.DataFrame], labels: Mapping[str, str]) -> pd.DataFrame:
    """Per arm and environment (and ``all``): success of each endpoint (a training seed), their
    mean and sample SD (NaN for one endpoint), and the episodes behind them."""
    rows = []
    for arm, df in frames.items():
        if df.empty:
            continue
        for env, g in [*df.groupby("env"), ("all", df)]:
            per = g.groupby("model")["won"].mean() * 100
            rows.append({"Arm": labels[arm], "Environment": env, "Endpoints": len(per), "Episodes": len(g),
                         "Mean success (%)": float(per.mean()),
                         "SD (%)": float(per.std(ddof=1)) if len(per) > 1 else np.nan})
    return pd.DataFrame(rows)


def ablation_caption(endpoints: Mapping[str, str], declared: Mapping[str, str], ok: Mapping[str, str]) -> str:
    """Table 9's caption: which endpoint played each variant and what that means for the comparison."""
    from memtrials.studies.history.calibrator.rollouts import trained_on

    notes = []
    if len(set(endpoints.values())) == 1:
        notes.append(f"both variants are played by the same endpoint ({next(iter(endpoints.values()))}), so no "
                     "training-data effect can show")
    stand_ins = sorted(v for v, e in endpoints.items() if e not in ok)
    if stand_ins:
        notes.append(f"untrained stand-in for {', '.join(stand_ins)}: not a checkpoint of the training rule")
    for v, e in endpoints.items():
        got = trained_on(declared, e) if e in ok else None
        if got is not None and got != v:
            notes.append(f"the {v} endpoint {e} was trained on the {got} dataset")
    return ("Training-data ablation (Table 9): Calibrator rollouts with the calibrator trained on content screening "
            "only and on the full pipeline; successes out of episodes per actor x environment and pooled"
            + ("; " + "; ".join(notes) if notes else ""))


def calls_by_endpoint(cells: Mapping[str, Sequence[str]], calibrator: str | None,
                      ablation_endpoints: Mapping[str, str]) -> dict[str, list[str]]:
    """The calls files of every Calibrator cell, by the endpoint that reviewed in it (the
    ``calibrator`` key: ``roles.calibrator``; ``calibrator-<endpoint>``; an ablation variant)."""
    out: dict[str, list[str]] = {}
    for key, paths in cells.items():
        who = calibrator if key == "calibrator" else key.partition("-")[2] if key.startswith("calibrator-") \
            else ablation_endpoints.get(key)
        if who:
            out.setdefault(who, []).extend(str(p)[: -len(".parquet")] + ".calls.parquet" for p in paths)
    return out


def _read(paths: Sequence[str]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()


def write_report(*, labels: str, compare: Sequence[str], datasets: Sequence[str], sft: Sequence[str],
                 rollouts: Mapping[str, Sequence[str]], calibrator: str | None, joint: Sequence[str] = (),
                 trained: Mapping[str, str], tables_dir: str, figures_dir: str, index_path: str,
                 served: Sequence[str] = (),
                 ablation: Mapping[str, Sequence[str]] | None = None,
                 ablation_endpoints: Mapping[str, str] | None = None,
                 arms: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Write every table and figure; ``index_path`` lists them.  Refuses (``ValueError``) when a
    training file (labels, datasets, joint-actor data) holds a task of an evaluation rollout."""
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
        "completed comparisons, ties included; only screened candidates are compared (a candidate the content screen "
        "rejects is a NOUPDATE target and never reaches a comparison), so the denominator counts screened candidates"))]
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
            sft_rows.append({"Variant": Path(p).parent.name, "Base model": m["recipe"].get("label") or
                             m["recipe"]["base_model"], "Examples": m["examples"], "Steps": m.get("steps"),
                             "Tokens per epoch": m.get("tokens_per_epoch"), "Seconds": m.get("seconds"),
                             "First loss": ls[0] if ls else np.nan, "Last loss": ls[-1] if ls else np.nan,
                             "Digest": m["digest"][:12]})
        out += [str(p) for p in write_table(pd.DataFrame(sft_rows), td / "sft_runs", caption="SFT runs")]
    calls = calls_by_endpoint({**rollouts, **(ablation or {})}, calibrator, dict(ablation_endpoints or {}))
    ok = trained_endpoints(trained, calls, served)
    if rollouts:
        frames = {c: _read(list(ps)) for c, ps in rollouts.items()}
        labels_ = {"raw": "Raw", "causal": "Causal Transition"}
        labels_.update({c: calibrator_label([calibrator if c == "calibrator" else c.partition("-")[2]], ok)
                        for c in frames if c.startswith("calibrator")})
        succ = success_rows(frames, labels_)
        cap = ("Full-rollout success (Table 8 / Figure 7), Wilson 95% intervals, all arms on the same tasks and seeds; "
               "the Calibrator rows: " + "; ".join(v for k, v in labels_.items() if k.startswith("calibrator"))
               + " (\"trained\" only where the checkpoint digest recorded with the calls equals its manifest's)")
        out += [str(p) for p in write_table(succ, td / "table8_success", caption=cap)]
        pooled = succ[(succ["Model"] == "all") | (succ["Environment"] == "all")]
        fig, ax = plt.subplots(figsize=(7, 3))
        keys = [f"{r.Model}/{r.Environment}" for r in pooled[pooled["Condition"] == "Raw"].itertuples()]
        width = 0.8 / max(1, len(labels_))
        for i, name in enumerate(labels_.values()):
            sub = pooled[pooled["Condition"] == name].set_index(pooled[pooled["Condition"] == name]
                                                                .apply(lambda r: f"{r.Model}/{r.Environment}", axis=1))
            values = [sub["Success (%)"].get(k, np.nan) for k in keys]
            bars = ax.bar(np.arange(len(keys)) + (i - 1) * width, values, width, label=name)
            _label_bars(ax, bars, values)
        ax.set_xticks(np.arange(len(keys)), keys, fontsize=6, rotation=30)
        ax.set_ylim(0, 105)
        ax.set_ylabel("Task success (%)")
        ax.legend(fontsize=6)
        out += [str(p) for p in save_figure(fig, [fd / "figure7_success.png", fd / "figure7_success.svg"])]
        plt.close(fig)
    out += _ablation_and_joint(td, fd, ablation or {}, dict(ablation_endpoints or {}), arms or {}, trained, ok)
    for p in joint:
        n = sum(1 for line in Path(p).read_text(encoding="utf-8").splitlines() if line.strip())
        out.append(f"{p} ({n} examples)")
    evaluation = [p for group in (rollouts, ablation or {}, arms or {}) for ps in group.values() for p in ps]
    disjoint = check_disjoint(sorted(set(evaluation)), [labels, *datasets, *joint])
    log.info("calibrator report: %s", disjoint)
    lines = ["# Calibrator (section 6): tables and figures", "", disjoint + ".", "",
             f"{len(lab)} contexts; label statistics:", "",
             "```json", json.dumps(stats, indent=1), "```", ""] + [f"- `{p}`" for p in out]
    atomic_write_text(index_path, "\n".join(lines) + "\n")
    log.info("calibrator report: %d files", len(out))
    return out


def _label_bars(ax: Any, bars: Any, values: Sequence[float]) -> None:
    """Each bar's value above it, so a success of 0 % reads as 0 rather than as a missing bar."""
    ax.bar_label(bars, labels=[f"{v:.0f}" if np.isfinite(v) else "n/a" for v in values], fontsize=6, padding=1)


TITLES = {"full": "Full Calibrator", "screen_only": "Content screening only",
          "joint": "Calibration + action", "action_only": "Action only"}


def _ablation_and_joint(td: Path, fd: Path, ablation: Mapping[str, Sequence[str]], endpoints: Mapping[str, str],
                        arms: Mapping[str, Sequence[str]], trained: Mapping[str, str],
                        ok: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    if ablation:
        frames = {v: _read(list(ps)) for v, ps in ablation.items()}
        labels = {v: calibrator_label([endpoints.get(v)], ok, TITLES[v]) for v in frames}
        succ = success_rows(frames, labels)
        out += [str(p) for p in write_table(succ, td / "table9_success",
                                            caption=ablation_caption(endpoints, trained, ok))]
    if arms:
        frames = {a: _read(list(ps)) for a, ps in arms.items()}
        labels = {a: calibrator_label(sorted(set(f["model"])) if not f.empty else [], ok, TITLES[a])
                  for a, f in frames.items()}
        rows = arm_rows(frames, labels)
        out += [str(p) for p in write_table(rows, td / "figure9_joint", caption=(
            "Joint actor against the action-only baseline (Figure 9): mean and SD of task success across each arm's "
            "endpoints (one per training seed), per environment"))]
        fig, ax = plt.subplots(figsize=(6, 3))
        envs = sorted(set(rows["Environment"])) if not rows.empty else []
        for i, (arm, name) in enumerate(labels.items()):
            sub = rows[rows["Arm"] == name].set_index("Environment") if not rows.empty else pd.DataFrame()
            values = [sub["Mean success (%)"].get(e, np.nan) for e in envs]
            bars = ax.bar(np.arange(len(envs)) + (i - 0.5) * 0.4, values, 0.4,
                          yerr=[np.nan_to_num(sub["SD (%)"].get(e, np.nan)) for e in envs], label=name)
            _label_bars(ax, bars, values)
        ax.set_xticks(np.arange(len(envs)), envs, fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_ylabel("Task success (%)")
        ax.legend(fontsize=6)
        out += [str(p) for p in save_figure(fig, [fd / "figure9_joint.png", fd / "figure9_joint.svg"])]
        plt.close(fig)
    return out
