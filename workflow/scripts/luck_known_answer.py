"""Rule luck_known_answer: the planted endpoint on the known-answer worlds, truth beside each
estimate (workflow/rules/luck.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

import os

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.luck.known import known_answer

s = snakemake  # noqa: F821
k = s.params.known
run_rule(s, lambda: known_answer(
    s.config, model=k["cell"]["endpoint"], params=k["params"], cell=k["cell"], rules=k["rules"],
    prompts_dir=s.params.prompts_dir, outdir=os.path.dirname(s.output.contrasts),
    tables_dir=os.path.dirname(s.output.tables[0])))
