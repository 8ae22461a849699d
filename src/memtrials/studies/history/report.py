"""Tables (Markdown, CSV, LaTeX, HTML) and figures (PNG, SVG) of the history study.

Analogues of *When History Fails to Become Experience* Tables 2-6, 10, 11 and Figures 2, 3,
4, 5 and 8, from the cell outputs; ``index.md`` lists everything written.  A part whose
inputs are empty (e.g. no unsuccessful source, no screened repeat pair) is written as a
table saying so, never skipped silently.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from memtrials.io import atomic_write_text, save_figure  # noqa: E402
from memtrials.report import write_table  # noqa: E402
from memtrials.studies.history import analysis as A  # noqa: E402
from memtrials.studies.history.design import CONDITION_LABELS, CONTINUATION_LABELS  # noqa: E402

log = logging.getLogger(__name__)
LABELS = {**CONDITION_LABELS, **{f"{k}-chat": f"{v} (chat)" for k, v in CONDITION_LABELS.items()}}
CONT_LABELS = {**CONTINUATION_LABELS, **{f"{k}-chat": f"{v} (chat)" for k, v in CONTINUATION_LABELS.items()}}
TABLE2 = ["raw", "recent3", "obsonly", "shuffle_all", "shuffle_old"]
TABLE4 = TABLE2 + ["causal", "experience"]
TABLE5 = ["raw", "causal", "check"]
PROBE = ["raw", "causal", "experience"]


def _present(df: pd.DataFrame, wanted: Sequence[str]) -> list[str]:
    have = set(df["condition"]) if len(df) else set()
    return [c for c in wanted if c in have]


def _empty(reason: str) -> pd.DataFrame:
    return pd.DataFrame([{"Note": reason}])


def _bars(ax: Any, groups: Sequence[str], series: Mapping[str, list[dict[str, float]]], ylabel: str) -> None:
    """Grouped bars of rates (percent) with Wilson intervals as error bars."""
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, (name, rates) in enumerate(series.items()):
        est = np.array([100 * r["rate"] if r["n"] else np.nan for r in rates])
        # clipped at 0: a Wilson bound of a 0 % or 100 % rate can cross it by a rounding error
        lo = np.array([max(0.0, 100 * (r["rate"] - r["lo"])) if r["n"] else 0 for r in rates])
        hi = np.array([max(0.0, 100 * (r["hi"] - r["rate"])) if r["n"] else 0 for r in rates])
        bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, est, width, label=name,
                      yerr=[lo, hi], capsize=2, error_kw={"lw": 0.8})
        for b, r in zip(bars, rates):
            if r["n"]:
                ax.annotate(f"{100 * r['rate']:.0f}", (b.get_x() + b.get_width() / 2, 1), ha="center",
                            va="bottom", fontsize=6, color="white" if r["rate"] > 0.1 else "black")
    ax.set_xticks(x, groups, fontsize=7, rotation=0)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_ylim(0, 105)
    ax.tick_params(labelsize=7)


def _rates(df: pd.DataFrame, cond: str, col: str | None, keys: Sequence[str], outcome: str) -> list[dict[str, float]]:
    out = []
    for k in keys:
        g = df[(df["condition"] == cond) & ((df[col] == k) if col else True)]
        out.append(A.rate(int(g[outcome].sum()), len(g)))
    return out


class Report:
    """Collects written files for the index."""

    def __init__(self, tables_dir: str, figures_dir: str) -> None:
        self.tables, self.figures = Path(tables_dir), Path(figures_dir)
        for folder in (self.tables, self.figures):  # declared outputs (folders), even when a run draws no figure
            folder.mkdir(parents=True, exist_ok=True)
        self.entries: list[tuple[str, str]] = []

    def table(self, name: str, df: pd.DataFrame, caption: str) -> None:
        write_table(df, self.tables / name, caption=caption, label=f"tab:history-{name}")
        self.entries.append((f"tables/{name}.{{md,csv,tex,html}}", caption))

    def figure(self, name: str, fig: Any, caption: str) -> None:
        save_figure(fig, [self.figures / f"{name}.png", self.figures / f"{name}.svg"])
        plt.close(fig)
        self.entries.append((f"figures/{name}.{{png,svg}}", caption))


WEBSHOP_NOTE = ("; WebShop: success = a purchase with reward 1.0, on synthetic goals of the 1,000-product catalog, "
                "goals whose exact purchase upstream caps below 1.0 kept")


def rollout_part(rep: Report, eps: pd.DataFrame, steps: pd.DataFrame, n_boot: int) -> None:
    if eps.empty:
        rep.table("table2_success", _empty("no rollout episodes"), "Table 2 analogue: no rollouts")
        return
    block = eps[~eps["condition"].str.endswith("-chat")]
    chat = eps[eps["condition"].str.endswith("-chat")]
    rep.table("table2_success", A.grouped_table(block, _present(block, TABLE2), LABELS),
              "Task success (%) with Wilson 95% intervals under history interventions (Table 2 analogue)"
              + (WEBSHOP_NOTE if "webshop" in set(block["env"].astype(str)) else ""))
    rep.table("table4_counts", A.count_table(block, _present(block, TABLE4), LABELS),
              "Successes / episodes per model-environment cell (Table 4 analogue)")
    rep.table("table5_check", A.count_table(block, _present(block, TABLE5), LABELS),
              "Raw, Causal and Check: successes / episodes (Table 5 analogue)")
    rep.table("table_paired_rollouts",
              A.paired_table(block, "raw", [c for c in _present(block, LABELS) if c != "raw"], A.EPISODE_KEY, LABELS,
                             n_boot=n_boot),
              "Change in success from Raw, paired by task: paired-bootstrap 95% interval and exact McNemar p")
    exp_steps = steps[steps["condition"] == "experience"] if len(steps) else steps
    rep.table("table6_experience_rates", A.experience_rates(exp_steps) if len(exp_steps) else _empty(
        "no Experience rollouts"), "Experience generation and NOUPDATE among valid reviews (Table 6 analogue)")
    if len(chat):
        conds = _present(chat, [f"{c}-chat" for c in TABLE4 + ["check"]])
        rep.table("table10_chat_counts", A.count_table(chat, conds, LABELS),
                  "Chat-format (user/assistant messages) successes / episodes (Table 10 analogue)")
    figure4(rep, block, n_boot)


def figure4(rep: Report, block: pd.DataFrame, n_boot: int) -> None:
    panels = [c for c in ("causal", "experience") if c in set(block["condition"])]
    if "raw" not in set(block["condition"]) or not panels:
        return
    models, envs = sorted(block["model"].unique()), sorted(block["env"].unique())
    grids, overall_lab = [], []
    for cond in panels:
        d = A.paired_vs(block, "raw", cond, A.EPISODE_KEY, by=["model", "env"], n_boot=200)
        grid = np.full((len(models) + 1, len(envs) + 1), np.nan)
        for _, r in d.iterrows():
            grid[models.index(r["model"]), envs.index(r["env"])] = 100 * r["diff"]
        grid[-1, :-1] = np.nanmean(grid[:-1, :-1], axis=0)
        grid[:-1, -1] = np.nanmean(grid[:-1, :-1], axis=1)
        overall = A.paired_vs(block, "raw", cond, A.EPISODE_KEY, n_boot=n_boot)
        grid[-1, -1] = 100 * overall["diff"].iloc[0] if len(overall) else np.nan
        grids.append(grid)
        overall_lab.append(f"{grid[-1, -1]:+.1f} p" if len(overall) else "—")
    finite = [np.abs(g[np.isfinite(g)]).max() for g in grids if np.isfinite(g).any()]
    lim = max([1.0] + finite)  # one colour scale for both panels
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 0.6 * len(models) + 2.2), squeeze=False,
                             layout="constrained")
    for ax, cond, grid, lab in zip(axes[0], panels, grids, overall_lab):
        ax.imshow(grid, cmap="RdBu", vmin=-lim, vmax=lim)
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, "—" if np.isnan(v) else f"{v:+.1f}", ha="center", va="center", fontsize=7,
                    color="white" if np.isfinite(v) and abs(v) > 0.6 * lim else "black")
        ax.set_xticks(range(len(envs) + 1), envs + ["model mean"], fontsize=7, rotation=30)
        ax.set_yticks(range(len(models) + 1), models + ["env. mean"], fontsize=7)
        ax.set_title(f"{LABELS[cond]} - Raw (overall {lab})", fontsize=8)
    fig.suptitle("Success change from Raw (percentage points, paired by task)", fontsize=9)
    rep.figure("figure4_change_from_raw", fig, "Change in success from the matching Raw cell (Figure 4 analogue)")


def continuation_labels(cont: pd.DataFrame, trained: Mapping[str, Any] | None = None) -> tuple[dict[str, str], str]:
    """Labels of the continuation conditions, the Calibrator's naming the endpoint that played
    the role and whether it is the learned calibrator or an untrained stand-in; and a
    caption note saying the same (empty when no Calibrator row is shown)."""
    labels = dict(CONT_LABELS)
    if cont.empty:
        return labels, ""
    base = cont["condition"].str.replace("-chat", "", regex=False)
    rows = cont[base == "calibrator"]
    if rows.empty:
        return labels, ""
    names = list(rows["calibrator"].dropna()) if "calibrator" in rows.columns else []
    from memtrials.studies.history.calibrator.rollouts import calibrator_label

    label = calibrator_label(names, trained or {})
    labels["calibrator"], labels["calibrator-chat"] = label, f"{label} (chat)"
    who = ", ".join(sorted(set(map(str, names)))) or "an endpoint not recorded"
    if "stand-in" in label:
        return labels, (f". Calibrator rows: the calibrator role was played by {who}, an untrained stand-in "
                        "(not a checkpoint of the calibrator's training rule; calibrator.trained_endpoints)")
    return labels, f". Calibrator rows: the learned calibrator served by {who}"


def continuation_part(rep: Report, cont: pd.DataFrame, n_boot: int, trained: Mapping[str, Any] | None = None) -> None:
    if cont.empty:
        rep.table("table_recovery", _empty("no continuations (no unsuccessful Raw source of length >= the minimum)"),
                  "Recovery from the restored floor(L/3) state")
        return
    labels, note = continuation_labels(cont, trained)
    cont = cont.assign(unit=cont["source_episode_id"])
    block = cont[~cont["condition"].str.endswith("-chat")]
    chat = cont[cont["condition"].str.endswith("-chat")]
    key = ["model", "env", "task_id"]
    conds = _present(block, list(CONTINUATION_LABELS))
    rows = []
    for c in conds:
        g = block[block["condition"] == c]
        rows.append({"Condition": labels[c], "Recovered/continuations": f"{int(g['won'].sum())}/{len(g)}",
                     "Recovery (%)": A.fmt_rate(int(g["won"].sum()), len(g)),
                     "Median first prompt tokens": int(round(float(g["first_prompt_tokens"].median())))})
    rep.table("table_recovery", pd.DataFrame(rows),
              "Recovery within the action budget from the restored floor(L/3) state (Figure 2/8 analogue)" + note)
    for base in ("raw", "reference"):
        if base in conds:
            rep.table(f"table_recovery_paired_vs_{base}", A.paired_table(block, base, conds, key, labels,
                                                                       n_boot=n_boot),
                      f"Change in recovery from {labels[base]}, paired by source trajectory" + note)
    if len(chat):
        cc = _present(chat, [f"{c}-chat" for c in CONTINUATION_LABELS])
        rep.table("table11_chat_recovery", A.count_table(chat, cc, labels),
                  "Recovery counts with user/assistant history (Table 11 analogue)"
                  + (note if any(c.startswith("calibrator") for c in cc) else ""))
    figure2_3(rep, block)
    if len(conds) > 1:
        fig, ax = plt.subplots(figsize=(1.1 * len(conds) + 1.5, 2.8))
        _bars(ax, [labels[c].replace(" (", "\n(", 1) for c in conds], {"recovery": [_rates(block, c, None, [None], "won")[0]
                                                                  for c in conds]}, "Recovery (%)")
        if "raw" in conds:
            ax.axhline(100 * block[block["condition"] == "raw"]["won"].mean(), ls="--", color="grey", lw=0.8)
        ax.set_title("Recovery from the same floor(L/3) state", fontsize=9)
        rep.figure("figure8_recovery_conditions", fig, "Recovery under the continuation conditions (Figure 8 analogue)"
                   + (note if "calibrator" in conds else ""))


def figure2_3(rep: Report, block: pd.DataFrame) -> None:
    pair = [c for c in ("raw", "reference") if c in set(block["condition"])]
    if len(pair) < 2:
        return
    envs, models = sorted(block["env"].unique()), sorted(block["model"].unique())
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8), gridspec_kw={"width_ratios": [1, len(envs), len(models)]})
    for ax, (col, keys, title) in zip(axes, [(None, [None], "Overall"), ("env", envs, "By environment"),
                                             ("model", models, "By model")]):
        _bars(ax, [k or "all" for k in keys], {CONT_LABELS[c]: _rates(block, c, col, keys, "won") for c in pair},
              "Recovery (%)")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    rep.figure("figure2_recovery", fig, "Recovery, Raw vs Reference, from the same restored state (Figure 2 analogue)")
    fig, axes = plt.subplots(1, 2, figsize=(8, 2.8))
    for c in pair:
        v = np.sort(block[block["condition"] == c]["first_prompt_tokens"].to_numpy())
        axes[0].step(v, 100 * np.arange(1, len(v) + 1) / len(v), where="post", label=CONT_LABELS[c])
    axes[0].set_xlabel("Prompt tokens at resumption", fontsize=8)
    axes[0].set_ylabel("Requests at or below (%)", fontsize=8)
    axes[0].legend(fontsize=7)
    ref = block[block["condition"] == "reference"]
    for i, e in enumerate(envs):
        v = ref[ref["env"] == e]["first_prompt_tokens"].to_numpy()
        lo, med, hi = np.percentile(v, [10, 50, 90])
        axes[1].plot([lo, hi], [i, i], color="C1")
        axes[1].plot([med], [i], "D", color="C1")
    axes[1].set_yticks(range(len(envs)), envs, fontsize=7)
    axes[1].set_xlabel("Prompt tokens (Reference): median, 10th-90th pct.", fontsize=8)
    lengths = block["first_prompt_tokens"].to_numpy()
    wide = lengths.min() > 0 and lengths.max() / lengths.min() > 8
    for ax in axes:  # logarithmic (as in the paper) only when the lengths span a wide range
        if wide:
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.tick_params(labelsize=7)
    rep.figure("figure3_prompt_lengths", fig, "Prompt length at the first resumed request (Figure 3 analogue)")


def probe_part(rep: Report, resp: pd.DataFrame, n_boot: int) -> None:
    if resp.empty:
        rep.table("table3_repetition", _empty("no screened repeat pair in the Raw rollouts"),
                  "Next-action repetition on fixed histories")
        return
    conds = _present(resp, PROBE)
    rep.table("table3_repetition", A.repetition_table(resp, conds, LABELS),
              "Next-action repetition on fixed histories: repeated count (rate %, Wilson 95%) (Table 3 analogue)")
    key = ["model", "env", "episode_id"]
    rep.table("table_repetition_paired", A.paired_table(resp.assign(won=resp["repeated"]), "raw", conds, key, LABELS,
                                                        n_boot=n_boot),
              "Change in repetition from Raw on the same histories (paired bootstrap, McNemar)")
    models = sorted(resp["model"].unique())
    fig, ax = plt.subplots(figsize=(1.6 * len(models) + 2, 2.8))
    ns = [resp[(resp["model"] == m) & (resp["condition"] == conds[0])]["episode_id"].nunique() for m in models]
    _bars(ax, [f"{m}\nN = {n}" for m, n in zip(models, ns)],
          {LABELS[c]: _rates(resp.assign(won=resp["repeated"]), c, "model", models, "won") for c in conds},
          "Next-action repetition (%)")
    ax.legend(fontsize=7)
    rep.figure("figure5_repetition", fig, "Probability of repeating the same action a third time (Figure 5 analogue)")


def with_cells(paths: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The episodes of cells ``paths`` and their steps (with each step's model, env and condition)."""
    eps = A.load(paths)
    steps = A.load([p[: -len(".parquet")] + ".steps.parquet" for p in paths if Path(p).exists()])
    if len(eps) and len(steps):
        steps = steps.merge(eps[["episode_id", "model", "env", "condition"]], on="episode_id", how="left")
    return eps, steps


def write_report(rollouts: Sequence[str], continuation: Sequence[str], probe: Sequence[str],
                 analysis: Mapping[str, Any], tables_dir: str, figures_dir: str, index_path: str,
                 trained_calibrators: Mapping[str, str] | None = None, planted: Sequence[str] = (),
                 planted_tasks: str | None = None, planted_slice: Mapping[str, Any] | None = None
                 ) -> list[tuple[str, str]]:
    """Write every table and figure; ``index_path`` lists them.  ``trained_calibrators``
    (``calibrator.trained_endpoints``: endpoint -> training-rule output folder) names the
    endpoints whose Calibrator rows are the learned calibrator (checked against the
    checkpoint's digest); any other is labelled an untrained stand-in.  ``planted``: the
    planted agent's rollout cells (``history.planted``), reported apart with the truth beside
    each estimate (:mod:`.planted_report`), from the task table ``planted_tasks`` and the
    config slice ``planted_slice``."""
    from memtrials.studies.history.planted_report import planted_part
    from memtrials.studies.history.calibrator.rollouts import trained_endpoints

    trained = trained_endpoints(trained_calibrators or {})
    n_boot = int(analysis["n_boot"])
    rep = Report(tables_dir, figures_dir)
    eps, steps = with_cells(rollouts)
    rollout_part(rep, eps, steps, n_boot)
    cont = A.load(continuation)
    continuation_part(rep, cont, n_boot, trained)
    probe_part(rep, A.load(probe), n_boot)
    if planted:
        if planted_tasks is None or not planted_slice:
            raise ValueError("history report: planted cells given without their task table and config slice")
        planted_part(rep, with_cells(planted), planted_tasks, planted_slice, n_boot)
    lines = ["# History study: tables and figures", "",
             f"{len(eps)} rollout episodes, {len(cont)} continuations, "
             f"{len(A.load(probe))} probe responses.", ""]
    lines += [f"- `{p}`: {c}" for p, c in rep.entries]
    atomic_write_text(index_path, "\n".join(lines) + "\n")
    log.info("history report: %d tables/figures", len(rep.entries))
    return rep.entries
