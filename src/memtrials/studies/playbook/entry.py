"""Entry points of the playbook study's rules, one per rule, keyword arguments only (called by
the thin scripts ``workflow/scripts/playbook_*.py``).

Each name is the function that runs the part, under the rule's name, so its signature (every
keyword a rule passes) is the one the reader and the tools see:

- ``growth``: rule ``playbook_growth``, one growth run (:func:`.growth.growth_run`);
- ``practice``: rule ``playbook_practice``, one practice round (:func:`.practice.practice_run`);
- ``choice``: rule ``playbook_choice``, candidate scoring, RBC and Best-Full (:func:`.choice.choice_run`);
- ``evaluation``: rule ``playbook_eval``, one candidate on the evaluation tasks (:func:`.evaluate.eval_run`);
- ``baseline``: rule ``playbook_baseline``, one baseline of one setting (:func:`.baseline_eval.baseline_run`);
- ``pooled``: rule ``playbook_pooled``, the K runs pooled and one practice round over them
  (:func:`.baseline_eval.pooled_run`);
- ``diagnostics``: rule ``playbook_diagnostics``, tags vs effects, harmful blocks, subsampling,
  split-half (:func:`.diagnostics.write_diagnostics`);
- ``known_answer``: rule ``playbook_known_answer``, the study's jobs on the planted world, truth beside
  estimate (:func:`.known_answer.known_answer_run`);
- ``report``: rule ``playbook_report``, tables, figures and per-setting records (:func:`.report.write_report`).
"""

from __future__ import annotations

from memtrials.studies.playbook.baseline_eval import baseline_run as baseline
from memtrials.studies.playbook.baseline_eval import pooled_run as pooled
from memtrials.studies.playbook.choice import choice_run as choice
from memtrials.studies.playbook.diagnostics import write_diagnostics as diagnostics
from memtrials.studies.playbook.evaluate import eval_run as evaluation
from memtrials.studies.playbook.growth import growth_run as growth
from memtrials.studies.playbook.known_answer import known_answer_run as known_answer
from memtrials.studies.playbook.practice import practice_run as practice
from memtrials.studies.playbook.report import write_report as report

__all__ = ["baseline", "choice", "diagnostics", "evaluation", "growth", "known_answer", "pooled", "practice", "report"]
