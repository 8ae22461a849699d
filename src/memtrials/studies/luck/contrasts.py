"""Registered contrasts of the luck study as linear combinations of reader cells
(*Lessons from Luck*, section 4, "Primary contrasts" and "Secondary quantities").

``Y[o, a]`` is 1 when the reader in the cell with previous-run outcome ``o`` and memory
arm ``a`` names the worse tool, for the decision named.  Every quantity is
``sum(coef * Y[decision, outcome, arm])`` per world, with a declared support (the
registered supports: [-2, 2] for P and the remedy differences of P and L; [-1, 1] for A,
L, T, Sus and the remedy differences of A).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from memtrials.studies.luck.design import ARMS, DECISIONS, OUTCOMES

Cell = tuple[str, str, str]  # (decision, outcome, arm)
F, S = "failure", "success"


@dataclass(frozen=True)
class Contrast:
    name: str
    terms: tuple[tuple[Cell, float], ...]
    support: tuple[float, float]
    family: str  # primary | qualifier | secondary | remedy | planted
    instruction: str = "RB"
    decision: str = ""
    description: str = ""


def _terms(*pairs: tuple[float, str, str, str]) -> tuple[tuple[Cell, float], ...]:
    acc: dict[Cell, float] = {}
    for coef, d, o, a in pairs:
        acc[(d, o, a)] = acc.get((d, o, a), 0.0) + coef
    return tuple((c, v) for c, v in acc.items() if v != 0.0)


def _for_instruction(i: str) -> list[Contrast]:
    sfx = "" if i == "RB" else f"[{i}]"
    x = i + "x"
    fam = "primary" if i == "RB" else "secondary"
    qfam = "qualifier" if i == "RB" else "secondary"
    G, B = "good", "bad"
    return [
        Contrast(f"P2{sfx}", _terms((1, G, F, i), (-1, G, S, i), (-1, G, F, "NEUTRAL"), (1, G, S, "NEUTRAL")),
                 (-2, 2), fam, i, G, "good decision: outcome-by-memory interaction"),
        Contrast(f"P3m{sfx}", _terms((1, B, S, i), (-1, B, F, i), (-1, B, S, "NEUTRAL"), (1, B, F, "NEUTRAL")),
                 (-2, 2), fam, i, B, "bad decision: mirror interaction"),
        Contrast(f"A2{sfx}", _terms((1, G, F, i), (-1, G, F, "NEUTRAL")), (-1, 1), qfam, i, G,
                 "adverse cell: lesson vs irrelevant item"),
        Contrast(f"L2{sfx}", _terms((1, G, F, i), (-1, G, F, x)), (-1, 1), qfam, i, G,
                 "adverse cell: lesson from this outcome vs from the other"),
        Contrast(f"A3{sfx}", _terms((1, B, S, i), (-1, B, S, "NEUTRAL")), (-1, 1), qfam, i, B,
                 "adverse cell: lesson vs irrelevant item"),
        Contrast(f"L3{sfx}", _terms((1, B, S, i), (-1, B, S, x)), (-1, 1), qfam, i, B,
                 "adverse cell: lesson from this outcome vs from the other"),
        Contrast(f"L2b{sfx}", _terms((1, G, S, x), (-1, G, S, i)), (-1, 1), "secondary", i, G,
                 "benign cell: lesson-source effect"),
        Contrast(f"L3b{sfx}", _terms((1, B, F, x), (-1, B, F, i)), (-1, 1), "secondary", i, B,
                 "benign cell: lesson-source effect"),
        Contrast(f"T1{sfx}", _terms((1, G, F, i), (-1, G, S, i)), (-1, 1), "secondary", i, G,
                 "lesson arm's outcome dependence alone"),
        Contrast(f"T3{sfx}", _terms((1, B, S, i), (-1, B, F, i)), (-1, 1), "secondary", i, B,
                 "lesson arm's outcome dependence alone"),
    ]


def _remedies(r: str) -> list[Contrast]:
    """Remedy differences ``r - RB`` of P, A and L, paired by world."""
    out = []
    for d, adv, ben, tag in (("good", F, S, "2"), ("bad", S, F, "3")):
        p = _terms((1, d, adv, r), (-1, d, ben, r), (-1, d, adv, "RB"), (1, d, ben, "RB"))
        a = _terms((1, d, adv, r), (-1, d, adv, "RB"))
        lt = _terms((1, d, adv, r), (-1, d, adv, r + "x"), (-1, d, adv, "RB"), (1, d, adv, "RBx"))
        pname = "P2" if tag == "2" else "P3m"
        out += [
            Contrast(f"d{pname}[{r}-RB]", p, (-2, 2), "remedy", r, d, f"remedy difference of {pname}"),
            Contrast(f"dA{tag}[{r}-RB]", a, (-1, 1), "remedy", r, d, f"remedy difference of A{tag}"),
            Contrast(f"dL{tag}[{r}-RB]", lt, (-2, 2), "remedy", r, d, f"remedy difference of L{tag}"),
        ]
    return out


SUS = Contrast(
    "Sus",
    _terms(*[(0.25, d, o, "PLANTED") for d in DECISIONS for o in OUTCOMES],
           *[(-0.25, d, o, "NEUTRAL") for d in DECISIONS for o in OUTCOMES]),
    (-1, 1), "planted", "", "", "planted increment: mean over the four cells of PLANTED - NEUTRAL",
)

CONTRASTS: tuple[Contrast, ...] = tuple(
    _for_instruction("RB") + _for_instruction("RBD") + _for_instruction("N")
    + _remedies("RBD") + _remedies("N") + [SUS]
)
CONTRAST_BY_NAME = {c.name: c for c in CONTRASTS}
PRIMARIES = ("P2", "P3m")
QUALIFIERS = {"P2": ("A2", "L2"), "P3m": ("A3", "L3")}
ADVERSE_NEUTRAL = {"P2": ("good", F, "NEUTRAL"), "P3m": ("bad", S, "NEUTRAL")}


def y_matrix(answers: pd.DataFrame, world_ids: list[str]) -> pd.DataFrame:
    """Worlds x (decision, outcome, arm) matrix of Y for one endpoint (NaN: not counted)."""
    cols = pd.MultiIndex.from_tuples([(d, o, a) for d in DECISIONS for o in OUTCOMES for a in ARMS],
                                     names=["decision", "outcome", "arm"])
    if answers.empty:
        return pd.DataFrame(np.nan, index=pd.Index(world_ids, name="world_id"), columns=cols)
    dup = answers.duplicated(["world_id", "decision", "outcome", "arm"])
    if dup.any():
        r = answers[dup].iloc[0]
        raise ValueError(
            f"answers of {r['model']}: duplicate cell {r['world_id']}/{r['decision']}/{r['outcome']}/"
            f"{r['arm']}; the answers table must hold one row per cell (rerun luck_readers)"
        )
    m = answers.pivot(index="world_id", columns=["decision", "outcome", "arm"], values="y")
    return m.reindex(index=pd.Index(world_ids, name="world_id"), columns=cols)


def world_values(y: pd.DataFrame, c: Contrast) -> pd.DataFrame:
    """Per-world value (NaN unless complete) and its lower / upper missing-data bounds.

    The bounds set every missing answer in the direction that lowers (raises) the
    contrast: a missing cell with a positive coefficient is 0 for the lower bound and 1
    for the upper bound, and the reverse for a negative coefficient.
    """
    value = pd.Series(0.0, index=y.index)
    lower = pd.Series(0.0, index=y.index)
    upper = pd.Series(0.0, index=y.index)
    complete = pd.Series(True, index=y.index)
    for cell, coef in c.terms:
        col = y[cell]
        present = col.notna()
        complete &= present
        value += coef * col.fillna(0.0)
        lo_fill, hi_fill = (0.0, 1.0) if coef > 0 else (1.0, 0.0)
        lower += coef * col.fillna(lo_fill)
        upper += coef * col.fillna(hi_fill)
    value[~complete] = np.nan
    return pd.DataFrame({"value": value, "lower": lower, "upper": upper, "complete": complete})
