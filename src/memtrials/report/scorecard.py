"""The scorecard of one endpoint: each study's headline quantity with its interval, and what
the run cost at that endpoint, as one Markdown page and one HTML page.

A study states its headline as :class:`Headline` rows (its own ``headline`` function, reached
through the study interface, :mod:`memtrials.pipeline.study`); a quantity the run could not
estimate is a row with ``status`` "not run" and the reason, never a 0.  The cost comes from
the model-call records of the run's jobs (:func:`record_cost`: what the results stand on)
and from the cache ledger (what this cache has paid the endpoint, every run together).
This module names no study.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from memtrials.io import atomic_write_text

NOT_RUN = "not run"


@dataclass(frozen=True)
class Headline:
    """One headline quantity of one study at one endpoint.

    ``estimate``, ``lo`` and ``hi`` are in ``unit`` (e.g. ``"pp"``: percentage points);
    ``interval`` names the interval's method and level; ``n`` counts the units the interval
    resamples or averages (``n_label`` says which); ``reading`` is the study's own word on the
    estimate where it has one (the luck study's registered reading).  ``status`` is ``"ok"``
    or :data:`NOT_RUN`, with ``why`` saying what is missing and how to get it."""

    study: str
    quantity: str
    estimate: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    unit: str = ""
    interval: str = ""
    n: int = 0
    n_label: str = ""
    reading: str = ""
    status: str = "ok"
    why: str = ""

    @classmethod
    def not_run(cls, study: str, quantity: str, why: str) -> "Headline":
        if not why:
            raise ValueError(f"{study}: {quantity}: a quantity that is not run needs its reason")
        return cls(study=study, quantity=quantity, status=NOT_RUN, why=why)

    def value(self) -> str:
        """``+5.0 pp [-2.0, +12.0]``, or ``not run``."""
        if self.status != "ok":
            return NOT_RUN
        digits = 1 if self.unit == "pp" else 3
        if any(math.isnan(v) for v in (self.estimate, self.lo, self.hi)):
            return f"{self.estimate:+.{digits}f} {self.unit}".strip() + " (no interval)"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.estimate:+.{digits}f}{unit} [{self.lo:+.{digits}f}, {self.hi:+.{digits}f}]"


@dataclass(frozen=True)
class Cost:
    """What the run's jobs recorded for one endpoint (:func:`record_cost`)."""

    files: int
    recorded_calls: int
    distinct_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    usd: float
    billed_usd: float | None


def record_cost(paths: Iterable[str | Path], endpoint: str) -> Cost:
    """Calls, tokens and dollars of ``endpoint`` in the records files ``paths`` (every job's
    ``*.calls.parquet``).  A request two jobs share is recorded by both (the second replays
    the cache), so tokens and dollars count each distinct request (``call_id``) once: what a
    run with an empty cache pays.  ``usd`` prices them at the registry's prices (the records'
    ``cost``); ``billed_usd`` sums the endpoint's own cost figure where it reported one."""
    import pandas as pd
    import pyarrow.parquet as pq

    from memtrials.llm.records import RECORD_SCHEMA

    cols = ["call_id", "endpoint", "prompt_tokens", "completion_tokens", "cached_tokens", "cost", "billed_cost"]
    files = [Path(p) for p in paths]
    frames = []
    for p in files:
        t = pq.read_table(p, schema=RECORD_SCHEMA, columns=cols, filters=[("endpoint", "=", endpoint)])
        if t.num_rows:
            frames.append(t.to_pandas())
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    distinct = df.drop_duplicates("call_id")
    billed = distinct["billed_cost"].dropna()
    return Cost(files=len(files), recorded_calls=int(len(df)), distinct_calls=int(len(distinct)),
                prompt_tokens=int(distinct["prompt_tokens"].fillna(0).sum()),
                completion_tokens=int(distinct["completion_tokens"].fillna(0).sum()),
                cached_tokens=int(distinct["cached_tokens"].fillna(0).sum()),
                usd=float(distinct["cost"].fillna(0).sum()),
                billed_usd=float(billed.sum()) if len(billed) else None)


def ledger_cost(totals: Sequence[Sequence[Any]], endpoint: str) -> dict[str, Any] | None:
    """The cache ledger's row of ``endpoint`` (``Cache.totals()``: endpoint, paid calls, prompt
    tokens, completion tokens, USD), or None when it paid that endpoint nothing."""
    for name, calls, pt, ct, usd in totals:
        if name == endpoint:
            return {"calls": int(calls or 0), "prompt_tokens": int(pt or 0), "completion_tokens": int(ct or 0),
                    "usd": float(usd or 0.0)}
    return None


def _usd(x: float | None) -> str:
    return "—" if x is None else f"${x:,.4f}"


def headline_rows(headlines: Sequence[Headline]) -> list[list[str]]:
    return [[h.study, h.quantity, h.value(), h.interval if h.status == "ok" else "",
             (f"{h.n} {h.n_label}".strip() if h.status == "ok" else ""),
             h.reading if h.status == "ok" else h.why] for h in headlines]


HEADLINE_COLUMNS = ["Study", "Quantity", "Estimate [interval]", "Interval", "Units", "Reading / why not run"]
COST_COLUMNS = ["Source", "Calls", "Prompt tokens", "Completion tokens", "Cached prompt tokens", "USD (registry prices)",
                "USD (billed by the endpoint)"]


def cost_rows(cost: Cost, ledger: Mapping[str, Any] | None, ledger_note: str) -> list[list[str]]:
    rows = [["records of this run's jobs: distinct requests "
             f"({cost.recorded_calls:,} recorded calls in {cost.files:,} files)", f"{cost.distinct_calls:,}",
             f"{cost.prompt_tokens:,}", f"{cost.completion_tokens:,}", f"{cost.cached_tokens:,}", _usd(cost.usd),
             _usd(cost.billed_usd)]]
    if ledger is None:
        rows.append([f"cache ledger: {ledger_note}", "—", "—", "—", "—", "—", "—"])
    else:
        rows.append([f"cache ledger: {ledger_note}", f"{ledger['calls']:,}", f"{ledger['prompt_tokens']:,}",
                     f"{ledger['completion_tokens']:,}", "—", _usd(ledger["usd"]), "—"])
    return rows


def _md_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return (["| " + " | ".join(esc(c) for c in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
            + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def _html_table(columns: Sequence[str], rows: Sequence[Sequence[str]], caption: str) -> list[str]:
    out = ['<table class="memtrials-table">', f"<caption>{html.escape(caption)}</caption>",
           "<thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows]
    return out + ["</tbody>", "</table>"]


HEADLINE_CAPTION = ("Each study's headline quantity at this endpoint with its interval; a quantity the run could not "
                    "estimate says why. Quantities of different studies are on their own scales: no anchor "
                    "compares them across studies.")
COST_CAPTION = ("What the run cost at this endpoint: the records of the run's jobs (each distinct request once: "
                "what a run with an empty cache pays, at the registry's prices and as the endpoint billed it) and "
                "the cache ledger (what this cache has paid the endpoint so far, every run together).")


def write_scorecard(endpoint: str, headlines: Sequence[Headline], cost: Cost, ledger: Mapping[str, Any] | None,
                    ledger_note: str, md_path: str | Path, html_path: str | Path) -> None:
    """Write the endpoint's scorecard as Markdown and as a standalone HTML page."""
    h_rows, c_rows = headline_rows(headlines), cost_rows(cost, ledger, ledger_note)
    title = f"Scorecard: {endpoint}"
    md = [f"# {title}", "", HEADLINE_CAPTION, "", *_md_table(HEADLINE_COLUMNS, h_rows), "", "## Cost", "",
          COST_CAPTION, "", *_md_table(COST_COLUMNS, c_rows), ""]
    atomic_write_text(md_path, "\n".join(md))
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
            "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;margin-bottom:1.5em}"
            "td,th{border:1px solid #999;padding:3px 6px;text-align:left}caption{text-align:left;padding:4px 0}"
            "</style></head><body>", f"<h1>{html.escape(title)}</h1>",
            *_html_table(HEADLINE_COLUMNS, h_rows, HEADLINE_CAPTION), "<h2>Cost</h2>",
            *_html_table(COST_COLUMNS, c_rows, COST_CAPTION), "</body></html>", ""]
    atomic_write_text(html_path, "\n".join(page))
