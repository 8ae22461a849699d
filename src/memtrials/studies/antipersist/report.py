"""Tables and figures of the anti-persistence study (md / csv / tex / html; png + svg).

- ``main``: design x setting evaluation success (percent, mean ± sd over seeds) with the
  equal-weighted average, the memory designs first, then the baselines;
- ``calls``: LLM calls per evaluation episode (synthesis plus execution) and per training
  episode, design x setting;
- ``keep_discard``: ``antipersist`` (guidance dropped) against ``antipersist-persisted``
  (the same text kept), per setting, with the difference;
- ``selector``: the bandit against each fixed mode and the uniform random mode;
- ``sweeps``: the γ and λ sweeps (when ``antipersist.sweeps.enabled``); the points equal
  to the main selector's settings are the main design's cells (:func:`sweep_table`);
- ``mode_shares``: each selector design's share of every mode per training round, and
  ``mode_shares_average``: the same averaged over the rounds (the paper's averages);
- ``per_round``: held-out success per evaluated round (every round with
  ``eval_every_round``, else the final one) beside training success per round, and the
  figures ``heldout_per_round`` and ``success_per_round`` (training), one panel per setting;
- ``error_reproduction``: exposure, flagged generation and admission of the abstraction
  and joint memories' rules, with the association (:mod:`.lineage`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from memtrials.io import atomic_write_text, save_figure
from memtrials.memory.snapshot import read_snapshot
from memtrials.report.tables import write_table
from memtrials.studies.antipersist import analysis, lineage
from memtrials.studies.antipersist.design import (
    ABLATIONS, BASELINES, DESIGNS, MEMORY_DESIGNS, label, sweep_of,
)


def pct(mean: float, sd: float) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    return f"{100 * mean:.1f}" + ("" if sd is None or math.isnan(sd) else f" ± {100 * sd:.1f}")


def order(designs: Sequence[str]) -> list[str]:
    rank = {d: i for i, d in enumerate((*MEMORY_DESIGNS, *ABLATIONS, *BASELINES))}
    return sorted(set(designs), key=lambda d: (rank.get(d, len(DESIGNS)), d))


def success_matrix(summary: pd.DataFrame, average: pd.Series, designs: Sequence[str]) -> pd.DataFrame:
    settings = sorted(summary["setting"].unique())
    by = summary.set_index(["design", "setting"])
    rows = []
    for d in designs:
        row = {"design": label(d)}
        for s in settings:
            row[s] = pct(by.loc[(d, s), "mean"], by.loc[(d, s), "sd"]) if (d, s) in by.index else "—"
        row["average"] = pct(average.get(d, float("nan")), float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


def keep_discard(summary: pd.DataFrame) -> pd.DataFrame:
    by = summary.set_index(["design", "setting"])["mean"]
    rows = []
    for s in sorted(summary["setting"].unique()):
        if ("antipersist", s) in by.index and ("antipersist-persisted", s) in by.index:
            kept, dropped = by[("antipersist-persisted", s)], by[("antipersist", s)]
            rows.append({"setting": s, "persisted": pct(kept, float("nan")), "discarded": pct(dropped, float("nan")),
                         "difference (points)": f"{100 * (dropped - kept):+.1f}"})
    return pd.DataFrame(rows, columns=["setting", "persisted", "discarded", "difference (points)"])


def calls_matrix(eval_calls: pd.DataFrame, train_calls: pd.DataFrame, designs: Sequence[str]) -> pd.DataFrame:
    rows = []
    ev, tr = eval_calls.set_index(["design", "setting"]), train_calls.set_index(["design", "setting"])
    for d in designs:
        for s in sorted(set(eval_calls["setting"]) | set(train_calls["setting"])):
            if (d, s) not in ev.index and (d, s) not in tr.index:
                continue
            rows.append({"design": label(d), "setting": s,
                         "eval calls / episode": ev["llm_calls"].get((d, s), float("nan")),
                         "eval synthesis / episode": ev["synthesis_calls_total"].get((d, s), float("nan")),
                         "train calls / episode": tr["llm_calls"].get((d, s), float("nan")),
                         "train synthesis / episode": tr["synthesis_calls_total"].get((d, s), float("nan"))})
    return pd.DataFrame(rows)


def sweep_table(summary: pd.DataFrame, average: pd.Series, plan: Sequence[Sequence]) -> pd.DataFrame:
    """One row per sweep point (``[key, value, design]``, :func:`.design.sweep_points`), filled
    from the design's cells: a point equal to the main setting is the main design's own row."""
    rows = []
    for key, value, design in plan:
        row = success_matrix(summary, average, [design]).iloc[0].to_dict()
        row["design"] = f"{'γ' if key == 'gamma' else 'λ'} = {value:g}"
        rows.append({**row, "cells": design})
    return pd.DataFrame(rows)


def rates_table(rates: pd.DataFrame) -> pd.DataFrame:
    """The error-reproduction rates as percent with their intervals."""
    if rates.empty:
        return pd.DataFrame(columns=["design", "setting"])

    def ci(r: pd.Series, name: str, scale: float = 100.0) -> str:
        v = r[name]
        if v is None or math.isnan(v):
            return "—"
        return f"{scale * v:.1f} [{scale * r[name + '_lo']:.1f}, {scale * r[name + '_hi']:.1f}]"

    return pd.DataFrame([{
        "design": label(r["design"]), "setting": r["setting"], "syntheses": r["syntheses"],
        "exposure (%)": ci(r, "exposure"), "flagged | exposed (%)": ci(r, "flagged_if_exposed"),
        "flagged | not exposed (%)": ci(r, "flagged_if_not_exposed"),
        "association (points)": ci(r, "association"), "admission of flagged (%)": ci(r, "admission"),
        "generated rules labelled": r["gen_exposed"] + r["gen_unexposed"], "unlabelled": r["unlabelled"],
    } for _, r in rates.iterrows()])


def figure_per_round(rounds: pd.DataFrame, out_stem: Path, ylabel: str = "training success (%)") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted(rounds["setting"].unique()) or ["(no data)"]
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.4), squeeze=False, sharey=True)
    colours = plt.get_cmap("tab20").colors  # up to 20 designs, each its own colour (tab10 repeats after 10)
    designs = order(rounds["design"])
    for ax, s in zip(axes[0], settings):
        g = rounds[rounds["setting"] == s]
        for d in order(g["design"]):
            line = g[g["design"] == d].sort_values("round")
            ax.plot(line["round"], 100 * line["success"], marker="o", ms=3, lw=1.2, label=label(d),
                    color=colours[designs.index(d) % len(colours)])
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("training round")
        ticks = sorted(int(r) for r in g["round"].unique())
        if ticks:  # rounds are whole numbers, also when only one round is drawn (the locator would split it)
            ax.set_xticks(ticks)
            ax.set_xlim(ticks[0] - 0.5, ticks[-1] + 0.5)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylim(-3, 103)  # a share in percent: 0 % reads as the floor, not as the middle of the axes
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    paths = save_figure(fig, [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")])
    plt.close(fig)
    return paths


WEBSHOP_NOTE = ("; WebShop: success = a purchase with reward 1.0, on synthetic goals of the 1,000-product catalog, "
                "goals whose exact purchase upstream caps below 1.0 kept")


def write_report(eval_paths: Sequence[str], train_paths: Sequence[str], tables_dir: str, figures_dir: str,
                 index_path: str, *, memory_paths: Sequence[str] = (), sweeps: Sequence[Sequence] = ()) -> None:
    """Read every job's episode table (and the lineage designs' final snapshots) and write the
    tables, the figures and the index; ``sweeps``: the sweep points ``[key, value, design]``."""
    ev = pd.concat([pd.read_parquet(p) for p in eval_paths], ignore_index=True)
    tr = pd.concat([pd.read_parquet(p) for p in train_paths], ignore_index=True)
    tables, figures = Path(tables_dir), Path(figures_dir)
    summary, average = analysis.success(ev)
    designs = order(summary["design"])
    written: list[tuple[str, str]] = []

    def table(name: str, df: pd.DataFrame, caption: str, empty: str = "no rows under this config") -> None:
        # a table without rows says why (an empty table reads as a broken one)
        df = pd.DataFrame([{"Note": f"{empty} (designs run: {', '.join(designs)})"}]) if df.empty else df
        write_table(df, tables / name, caption=caption, float_format=lambda x: f"{x:.2f}")
        written.append((name, caption))

    n_seeds = int(summary["seeds"].max()) if len(summary) else 0
    table("main", success_matrix(summary, average, designs),
          f"Held-out success (%) by design and setting, mean ± sd over {n_seeds} seed(s); average: equal-weighted "
          "over settings. Reflexion is served across tasks (its task's reflections, then the most similar tasks', "
          "k in all; the project's reading, since held-out tasks never occur in training)"
          + (WEBSHOP_NOTE if "webshop" in set(ev["env"].astype(str)) else ""))
    table("calls", calls_matrix(analysis.calls(analysis.final_round(ev)), analysis.calls(tr), designs),
          "LLM calls per episode (synthesis plus execution; embeddings not counted)")
    table("keep_discard", keep_discard(summary), "Keep versus discard: the same synthesized guidance persisted or "
          "dropped after the episode (held-out success, %)",
          "needs both antipersist and antipersist-persisted in antipersist.designs")
    selector = [d for d in designs if d == "antipersist" or d in ABLATIONS]
    table("selector", success_matrix(summary, average, selector), "The mode bandit against fixed modes and a "
          "uniform random mode (held-out success, %)" + ("" if len(selector) > 1 else
          "; no ablation ran (antipersist.designs lists no fixed-<mode> or random design: the default leaves them "
          "out for time, the paper preset runs them), so only the bandit's row"))
    if sweeps:
        table("sweeps", sweep_table(summary, average, sweeps), "Sweeps of the decay γ and the call penalty λ "
              "(held-out success, %; the other settings at their defaults). The points equal to the main settings "
              "are the main Anti-Persistence design's own cells (column cells), not a re-run")
    shares = analysis.mode_shares(tr)
    shares = shares.assign(design=shares["design"].map(label)) if len(shares) else shares
    table("mode_shares", shares, "Share of each synthesis mode per training round (pooled over seeds)")
    avg = analysis.mode_shares_average(tr)
    avg = avg.assign(design=avg["design"].map(label)) if len(avg) else avg
    table("mode_shares_average", avg, "Share of each synthesis mode averaged over the training rounds (the "
          "paper's averages; per round: mode_shares); averages say nothing about convergence")
    train_rounds, held = analysis.per_round(tr), analysis.heldout_per_round(ev)
    both = train_rounds.rename(columns={"success": "training success"}).merge(
        held.rename(columns={"success": "held-out success"}), on=["design", "setting", "round"], how="outer")
    evaluated = sorted(held["round"].unique())
    table("per_round", both.assign(design=both["design"].map(label)).sort_values(["design", "setting", "round"]),
          "Success per round, mean over seeds: held-out (the round's snapshot frozen on the held-out pool; rounds "
          f"evaluated: {', '.join(map(str, evaluated))}) and training (the stream's own episodes, rotation and "
          "exploration included)")
    figure_per_round(held, figures / "heldout_per_round", "held-out success (%)")
    figure_per_round(train_rounds, figures / "success_per_round")
    snaps = [read_snapshot(p) for p in memory_paths]
    if snaps:
        table("error_reproduction", rates_table(lineage.rates(lineage.counts(snaps, tr))),
              "Error reproduction in the stored-abstraction designs (training streams, pooled over seeds; 95 % "
              "Wilson intervals, the association a Newcombe interval treating rules as independent). A rule is "
              "flagged when the training episodes it was served in succeeded less often than the stream's average; "
              "exposure: the episode a synthesis read was served a flagged rule; association: flagged | exposed "
              "minus flagged | not exposed; admission: flagged generated rules stored as new. An association, "
              "not a causal effect")
    lines = ["# Anti-persistence study: tables", "",
             f"{len(ev)} evaluation and {len(tr)} training episodes; {len(designs)} designs.", ""]
    lines += [f"- [{caption}]({name}.md)" for name, caption in written]
    lines += ["", "Figures: held-out success per evaluated round, `../figures/heldout_per_round.png`; training "
              "success per round, `../figures/success_per_round.png` (and `.svg`).", ""]
    atomic_write_text(index_path, "\n".join(lines))
