"""Table writers: one DataFrame to Markdown, CSV, LaTeX (booktabs) and HTML.

The writers take a table whose cells are already formatted for reading (strings), or
raw numbers (formatted with ``float_format``); the CSV keeps the values as given.
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from memtrials.io import atomic_write_text

FORMATS = ("md", "csv", "tex", "html")
EMPTY = "(no rows)"
"""The one row an HTML table without rows shows (its caption says when a table may be empty)."""


def fmt_signed(x: float, digits: int = 3) -> str:
    """``+0.112`` / ``-0.039``; an em dash for NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:+.{digits}f}"


def fmt_interval(est: float, lo: float, hi: float, digits: int = 3) -> str:
    """``+0.112 [+0.097, +0.126]``."""
    if any(v is None or math.isnan(v) for v in (est, lo, hi)):
        return "—"
    return f"{fmt_signed(est, digits)} [{fmt_signed(lo, digits)}, {fmt_signed(hi, digits)}]"


def fmt_p(p: float) -> str:
    """p-values: three significant digits, scientific below 0.001."""
    if p is None or math.isnan(p):
        return "—"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def _cell(v: object, float_format: Callable[[float], str]) -> str:
    if isinstance(v, float):
        return "—" if math.isnan(v) else float_format(v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "" if v is None else str(v)


def _cells(df: pd.DataFrame, float_format: Callable[[float], str]) -> list[list[str]]:
    return [[_cell(v, float_format) for v in row] for row in df.itertuples(index=False)]


def table_markdown(df: pd.DataFrame, caption: str | None = None,
                   float_format: Callable[[float], str] = lambda x: f"{x:.3f}") -> str:
    head = [str(c) for c in df.columns]
    rows = _cells(df, float_format)
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = []
    if caption:
        lines += [caption, ""]
    lines.append("| " + " | ".join(esc(h) for h in head) + " |")
    lines.append("|" + "|".join("---" for _ in head) + "|")
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "—": "---",
        "−": "-", "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def _tex(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in s)


def table_latex(df: pd.DataFrame, caption: str | None = None, label: str | None = None,
                float_format: Callable[[float], str] = lambda x: f"{x:.3f}") -> str:
    cols = "l" * len(df.columns)
    out = ["\\begin{table}[t]", "\\centering", "\\small"]
    if caption:
        out.append(f"\\caption{{{_tex(caption)}}}")
    if label:
        out.append(f"\\label{{{label}}}")
    out += [f"\\begin{{tabular}}{{{cols}}}", "\\toprule",
            " & ".join(_tex(str(c)) for c in df.columns) + " \\\\", "\\midrule"]
    out += [" & ".join(_tex(c) for c in r) + " \\\\" for r in _cells(df, float_format)]
    out += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(out) + "\n"


def table_html(df: pd.DataFrame, caption: str | None = None,
               float_format: Callable[[float], str] = lambda x: f"{x:.3f}") -> str:
    out = ["<table class=\"memtrials-table\">"]
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns) + "</tr></thead>")
    out.append("<tbody>")
    out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in _cells(df, float_format)]
    if df.empty:  # say so in the page (the HTML report shows it), not a bare header or nothing
        out.append(f"<tr><td colspan=\"{max(1, len(df.columns))}\">{EMPTY}</td></tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out) + "\n"


def write_table(df: pd.DataFrame, stem: str | os.PathLike[str], caption: str | None = None,
                formats: Iterable[str] = FORMATS, label: str | None = None,
                float_format: Callable[[float], str] = lambda x: f"{x:.3f}") -> list[Path]:
    """Write ``stem.md``, ``stem.csv``, ``stem.tex``, ``stem.html`` (each atomically)."""
    stem = Path(stem)
    written = []
    for fmt in formats:
        path = stem.with_name(stem.name + "." + fmt)
        if fmt == "md":
            text = table_markdown(df, caption, float_format)
        elif fmt == "csv":
            text = df.to_csv(index=False)
        elif fmt == "tex":
            text = table_latex(df, caption, label, float_format)
        elif fmt == "html":
            text = table_html(df, caption, float_format)
        else:
            raise ValueError(f"unknown table format {fmt!r}; known: {FORMATS}")
        written.append(atomic_write_text(path, text))
    return written
