"""The "Known-answer runs" section: every study's planted tables gathered in one place.

Each study's rules file appends its planted tables to ``KNOWN_ANSWER_TABLES`` (in
``workflow/rules/common.smk``; entries ``{"study": <name>, "stem": <table path without
extension>}``); rule ``known_answer_report`` (``workflow/rules/known_answer.smk``) calls
:func:`gather`, which writes ``results/known_answer/index.md`` and ``index.html``: per study its
tables (the Markdown each study wrote, caption included) and, where a table has the
:data:`~memtrials.report.truth.COVERED` column, its coverage of the planted truth; then one
summary table of every study's coverage.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from memtrials.io import atomic_write_text
from memtrials.report.tables import table_html, table_markdown
from memtrials.report.truth import COVERED, PLANTED_NOTE, TRUTH, coverage

TITLE = "Known-answer runs"


def _coverage_row(study: str, stem: Path) -> dict[str, Any] | None:
    csv = stem.with_name(stem.name + ".csv")
    if not csv.is_file():
        return None
    df = pd.read_csv(csv)
    if COVERED not in df.columns or TRUTH not in df.columns:
        return None
    df[COVERED] = df[COVERED].astype(str).str.lower().isin(("true", "1", "yes"))
    c = coverage(df, "estimate")
    return {"study": study, "table": stem.name, "cells": c["cells"], "covered": c["covered"],
            "coverage": c["rate"], "mean bias": c["bias"]}


def gather(entries: Iterable[Mapping[str, str]], out_md: str | os.PathLike[str],
           out_html: str | os.PathLike[str]) -> pd.DataFrame:
    """Write the section (Markdown and HTML) from ``entries`` (``study``, ``stem``); returns the
    coverage summary (one row per table with a truth column).  A listed table that was not
    written is an error naming it."""
    entries = list(entries)
    md = [f"# {TITLE}", "", PLANTED_NOTE, ""]
    htm = [f"<h1>{TITLE}</h1>", f"<p>{html.escape(PLANTED_NOTE)}</p>"]
    rows = []
    for study in dict.fromkeys(e["study"] for e in entries):
        md += [f"## {study}", ""]
        htm.append(f"<h2>{html.escape(study)}</h2>")
        for e in (e for e in entries if e["study"] == study):
            stem = Path(e["stem"])
            src = stem.with_name(stem.name + ".md")
            if not src.is_file():
                raise FileNotFoundError(f"known-answer runs: {study} listed {src}, which was not written")
            md += [src.read_text(encoding="utf-8").rstrip(), ""]
            page = stem.with_name(stem.name + ".html")
            if page.is_file():
                htm.append(page.read_text(encoding="utf-8"))
            row = _coverage_row(study, stem)
            if row is not None:
                rows.append(row)
    summary = pd.DataFrame(rows, columns=["study", "table", "cells", "covered", "coverage", "mean bias"])
    caption = ("Coverage of the planted truth by the 95 % intervals, per planted table (truth computed "
               "from the planted function, estimates from the runs).")
    if len(summary):
        md += ["## Coverage", "", table_markdown(summary, caption).rstrip(), ""]
        htm += ["<h2>Coverage</h2>", table_html(summary, caption)]
    if not entries:
        md += ["No study listed planted tables in this run.", ""]
        htm.append("<p>No study listed planted tables in this run.</p>")
    atomic_write_text(out_md, "\n".join(md))
    atomic_write_text(out_html, "\n".join(htm) + "\n")
    return summary


def write_planted(frames: Mapping[str, pd.DataFrame], captions: Mapping[str, str], out_dir: str | os.PathLike[str],
                  **summary: Any) -> dict[str, Any]:
    """Write a known-answer run's tables (``<out_dir>/tables/<name>``, every format, with ``captions``)
    and ``<out_dir>/summary.json``: ``summary`` plus the intervals over every table with a
    :data:`~memtrials.report.truth.COVERED` column (``covered``, ``intervals``, ``coverage``); returns it."""
    from memtrials.io import atomic_write_json
    from memtrials.report.tables import write_table

    out = Path(out_dir)
    k = n = 0
    for name, df in frames.items():
        write_table(df, out / "tables" / name, caption=captions[name])
        if COVERED in df.columns and len(df):
            c = df[COVERED].dropna().astype(bool)
            k, n = k + int(c.sum()), n + len(c)
    record = {**summary, "covered": k, "intervals": n, "coverage": k / n if n else None}
    atomic_write_json(out / "summary.json", record)
    return record
