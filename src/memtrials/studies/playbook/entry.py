"""Entry points of the playbook study's rules, one per rule, keyword arguments only (called by
the thin scripts ``workflow/scripts/playbook_*.py``).  Each passes its arguments on to the
module that runs the part; the keywords are that function's."""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.studies.playbook.baseline_eval import baseline_run, pooled_run
from memtrials.studies.playbook.choice import choice_run
from memtrials.studies.playbook.diagnostics import write_diagnostics
from memtrials.studies.playbook.evaluate import eval_run
from memtrials.studies.playbook.growth import growth_run
from memtrials.studies.playbook.practice import practice_run
from memtrials.studies.playbook.report import write_report


async def growth(config: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Rule ``playbook_growth``: one growth run (:func:`.growth.growth_run`)."""
    return await growth_run(config, **kwargs)


async def practice(config: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Rule ``playbook_practice``: one practice round (:func:`.practice.practice_run`)."""
    return await practice_run(config, **kwargs)


async def choice(config: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Rule ``playbook_choice``: candidate scoring, RBC and Best-Full (:func:`.choice.choice_run`)."""
    return await choice_run(config, **kwargs)


async def evaluation(config: Mapping[str, Any], **kwargs: Any) -> Any:
    """Rule ``playbook_eval``: one candidate on the evaluation tasks (:func:`.evaluate.eval_run`)."""
    return await eval_run(config, **kwargs)


async def baseline(config: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Rule ``playbook_baseline``: one baseline of one setting (:func:`.baseline_eval.baseline_run`)."""
    return await baseline_run(config, **kwargs)


async def pooled(config: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Rule ``playbook_pooled``: the K runs pooled and one practice round over them
    (:func:`.baseline_eval.pooled_run`)."""
    return await pooled_run(config, **kwargs)


def diagnostics(**kwargs: Any) -> None:
    """Rule ``playbook_diagnostics``: tags vs effects, harmful blocks, subsampling, split-half
    (:func:`.diagnostics.write_diagnostics`)."""
    write_diagnostics(**kwargs)


def report(**kwargs: Any) -> None:
    """Rule ``playbook_report``: tables, figures and per-setting records (:func:`.report.write_report`)."""
    write_report(**kwargs)
