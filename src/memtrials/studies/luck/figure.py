"""Figure 1 of the luck study: per-endpoint P2 (filled) and P3m (open) with their
registered 95 % intervals and the 0.10 margin (*Lessons from Luck*, section 5.2)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from memtrials.report import save_figure  # noqa: E402
from memtrials.studies.luck.analysis import PANEL  # noqa: E402


def figure1(quantities: pd.DataFrame, margin: float = 0.10):
    q = quantities[(quantities.subset == "all") & quantities.quantity.isin(["P2", "P3m"])]
    units = [u for u in dict.fromkeys(q.unit) if u != PANEL] + [PANEL]
    height = 1.9 + 0.5 * len(units)
    fig, ax = plt.subplots(figsize=(6.4, height))
    for i, u in enumerate(units):
        y = len(units) - 1 - i
        for name, dy, face in (("P2", 0.12, "C0"), ("P3m", -0.12, "white")):
            r = q[(q.unit == u) & (q.quantity == name)]
            if r.empty:
                continue
            r = r.iloc[0]
            ax.errorbar(r.estimate, y + dy, xerr=[[r.estimate - r.lo], [r.hi - r.estimate]], fmt="o",
                        color="C0", mfc=face, mec="C0", ms=6, capsize=3, lw=1.2,
                        label=f"{name} ({'good' if name == 'P2' else 'bad'} decision)" if i == 0 else None)
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.axvline(margin, color="C3", ls="--", lw=1.0, label=f"registered margin {margin:.2f}")
    ax.set_yticks(range(len(units)))
    ax.set_yticklabels([("panel" if u == PANEL else u) for u in reversed(units)])
    ax.set_xlabel("contrast (difference-in-differences of worse-tool rates)")
    ax.set_title("Lessons from Luck: P2 and P3m with registered 95% intervals", fontsize=10)
    ax.set_ylim(-0.6, len(units) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.35 / height, 1, 1))
    return fig


def write_figure1(quantities: pd.DataFrame, paths: list[str | Path], margin: float = 0.10) -> list[Path]:
    fig = figure1(quantities, margin)
    try:
        return save_figure(fig, paths)
    finally:
        plt.close(fig)
