"""Rule ``scorecard``: gather every registered study's headline for one endpoint, with the
run's cost there, into ``results/scorecard/<endpoint>.{md,html}``.

The rule (``workflow/rules/scorecard.smk``) passes each study's
:meth:`memtrials.pipeline.study.Study.headline_plan` as plain data; this module calls the
function each plan names and writes the page (:mod:`memtrials.report.scorecard`).  It names
no study, and no study imports another: each computes its own quantities.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from memtrials.pipeline.study import Study
    from memtrials.report.scorecard import Headline

log = logging.getLogger(__name__)


def rule_inputs(studies: Iterable[Study], model: str, records: Iterable[str] = ()) -> dict[str, list[str]]:
    """The scorecard rule's inputs for endpoint ``model``: every job's calls file (each study's
    :meth:`~memtrials.pipeline.study.Study.record_files`, and ``records``) and each study's
    headline inputs, named ``<study>_<name>`` (read while Snakemake parses: no pandas)."""
    studies = list(studies)
    out = {"records": sorted({*records, *(p for s in studies for p in s.record_files())})}
    for s in studies:
        for key, paths in s.headline_plan(model)["inputs"].items():
            out[f"{s.name}_{key}"] = list(paths)
    return out


def study_headlines(model: str, plan: Mapping[str, Any]) -> list[Headline]:
    """One study's rows: "not run" with the plan's reason, else what its function returns,
    checked against the quantities the study declares (a declared quantity it leaves out is
    "not run", never dropped)."""
    from memtrials.report.scorecard import Headline

    study, quantities = str(plan["study"]), list(plan["quantities"])
    if plan.get("why"):
        return [Headline.not_run(study, q, str(plan["why"])) for q in quantities]
    module, _, name = str(plan["function"]).partition(":")
    rows = list(getattr(importlib.import_module(module), name)(model, dict(plan["inputs"]),
                                                                        dict(plan.get("options") or {})))
    unknown = [h.quantity for h in rows if h.quantity not in quantities]
    if unknown:
        raise ValueError(f"{module}.{name} returned quantities {unknown} that {study}'s headline_quantities "
                         f"({quantities}) does not declare; declare them in the study's workflow class")
    have = {h.quantity for h in rows}
    rows += [Headline.not_run(study, q, f"{module}.{name} returned no row for it") for q in quantities
             if q not in have]
    return sorted(rows, key=lambda h: quantities.index(h.quantity))


def ledger_totals(cache: Mapping[str, Any]) -> tuple[list[Any], str]:
    """The cache ledger's per-endpoint totals and a note saying what they cover (or why none)."""
    from memtrials.llm.cache.backends import open_cache

    path = Path(cache["path"])
    backend = str(cache["backend"])
    present = path.is_file() if backend == "sqlite" else (path.parent / "shards").is_dir()
    if not present:
        return [], f"no cache at {path} (cache.backend {backend}): nothing paid through it"
    c = open_cache(path, backend=backend)
    try:
        return list(c.totals()), f"paid so far through {path} (every run sharing this cache)"
    finally:
        c.close()


def write(*, model: str, plans: Sequence[Mapping[str, Any]], records: Sequence[str], cache: Mapping[str, Any],
          out_md: str, out_html: str) -> list[Headline]:
    """Every study's headline for endpoint ``model``, the cost from ``records`` and the cache
    ledger, written as ``out_md`` and ``out_html``."""
    from memtrials.report.scorecard import ledger_cost, record_cost, write_scorecard

    rows: list[Headline] = []
    for plan in plans:
        rows += study_headlines(model, plan)
    cost = record_cost(records, model)
    totals, note = ledger_totals(cache)
    ledger = ledger_cost(totals, model)
    if ledger is None and totals:
        note += "; no paid call of this endpoint in it"
    write_scorecard(model, rows, cost, ledger, note, out_md, out_html)
    log.info("scorecard %s: %d quantities (%d not run), %d distinct calls", model, len(rows),
             sum(h.status != "ok" for h in rows), cost.distinct_calls)
    return rows
