"""Rule calibrator_known_answer: the label chain on the planted world with the planted
calibrator, truth beside each estimate (workflow/rules/calibrator.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

import os

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator.known import known_answer

s = snakemake  # noqa: F821
k = s.params.known
run_rule(s, lambda: known_answer(
    s.config, model=k["cell"]["endpoint"], params=k["params"], cell=k["cell"], actor=k["actor"],
    actor_prompts_dir=s.params.actor_prompts_dir, calibrator_prompts_dir=s.params.prompts_dir,
    outdir=os.path.dirname(s.output.known), tables_dir=os.path.dirname(s.output.tables[0])))
