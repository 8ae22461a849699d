"""Tables and figures of the anti-persistence study (md / csv / tex / html; png + svg).

- ``main``: design x setting evaluation success (percent, mean ± sd over seeds) with the
  equal-weighted average, the memory designs first, then the baselines;
- ``calls``: LLM calls per evaluation episode (synthesis plus execution) and per training
  episode, design x setting;
- ``keep_discard``: ``antipersist`` (guidance dropped) against ``antipersist-persisted``
  (the same text kept), per setting, with the difference;
- ``selector``: the bandit against each fixed mode and the uniform random mode;
- ``sweeps``: the γ and λ sweeps (when ``antipersist.sweeps.enabled``);
- ``mode_shares``: each selector design's share of every mode per training round;
- ``per_round``: training success per round for every design, and the figure
  ``success_per_round`` (one panel per setting).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from memtrials.io import atomic_write_text, save_figure
from memtrials.report.tables import write_table
from memtrials.studies.antipersist import analysis
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


def figure_per_round(rounds: pd.DataFrame, out_stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted(rounds["setting"].unique()) or ["(no data)"]
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.4), squeeze=False, sharey=True)
    for ax, s in zip(axes[0], settings):
        g = rounds[rounds["setting"] == s]
        for d in order(g["design"]):
            line = g[g["design"] == d].sort_values("round")
            ax.plot(line["round"], 100 * line["success"], marker="o", ms=3, lw=1.2, label=label(d))
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("training round")
        ax.xaxis.get_major_locator().set_params(integer=True)  # rounds are whole numbers
        ax.grid(alpha=0.3)
    axes[0][0].set_ylim(-3, 103)  # a share in percent: 0 % reads as the floor, not as the middle of the axes
    axes[0][0].set_ylabel("training success (%)")
    axes[0][-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    paths = save_figure(fig, [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")])
    plt.close(fig)
    return paths


WEBSHOP_NOTE = ("; WebShop: success = a purchase with reward 1.0, on synthetic goals of the 1,000-product catalog, "
                "goals whose exact purchase upstream caps below 1.0 kept")


def write_report(eval_paths: Sequence[str], train_paths: Sequence[str], tables_dir: str, figures_dir: str,
                 index_path: str) -> None:
    """Read every job's episode table and write the tables, the figure and the index."""
    ev = pd.concat([pd.read_parquet(p) for p in eval_paths], ignore_index=True)
    tr = pd.concat([pd.read_parquet(p) for p in train_paths], ignore_index=True)
    tables, figures = Path(tables_dir), Path(figures_dir)
    summary, average = analysis.success(ev)
    designs = order(summary["design"])
    written: list[tuple[str, str]] = []

    def table(name: str, df: pd.DataFrame, caption: str) -> None:
        write_table(df, tables / name, caption=caption, float_format=lambda x: f"{x:.2f}")
        written.append((name, caption))

    n_seeds = int(summary["seeds"].max()) if len(summary) else 0
    table("main", success_matrix(summary, average, designs),
          f"Held-out success (%) by design and setting, mean ± sd over {n_seeds} seed(s); average: equal-weighted "
          "over settings" + (WEBSHOP_NOTE if "webshop" in set(ev["env"].astype(str)) else ""))
    table("calls", calls_matrix(analysis.calls(ev), analysis.calls(tr), designs),
          "LLM calls per episode (synthesis plus execution; embeddings not counted)")
    table("keep_discard", keep_discard(summary), "Keep versus discard: the same synthesized guidance persisted or "
          "dropped after the episode (held-out success, %)")
    selector = [d for d in designs if d == "antipersist" or d in ABLATIONS]
    table("selector", success_matrix(summary, average, selector), "The mode bandit against fixed modes and a "
          "uniform random mode (held-out success, %)")
    sweeps = [d for d in designs if sweep_of(d) is not None or d == "antipersist"]
    if any(sweep_of(d) is not None for d in designs):
        table("sweeps", success_matrix(summary, average, sweeps), "Sweeps of the decay γ and the call penalty λ "
              "(held-out success, %; the other settings at their defaults)")
    shares = analysis.mode_shares(tr)
    shares = shares.assign(design=shares["design"].map(label)) if len(shares) else shares
    table("mode_shares", shares, "Share of each synthesis mode per training round (pooled over seeds)")
    rounds = analysis.per_round(tr)
    table("per_round", rounds.assign(design=rounds["design"].map(label)), "Training success per round "
          "(mean over seeds)")
    figure_per_round(rounds, figures / "success_per_round")
    lines = ["# Anti-persistence study: tables", "",
             f"{len(ev)} evaluation and {len(tr)} training episodes; {len(designs)} designs.", ""]
    lines += [f"- [{caption}]({name}.md)" for name, caption in written]
    lines += ["", "Figure: training success per round, `../figures/success_per_round.png` (and `.svg`).", ""]
    atomic_write_text(index_path, "\n".join(lines))
