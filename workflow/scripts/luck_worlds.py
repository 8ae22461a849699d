"""Rule luck_worlds: generate the worlds table (workflow/rules/luck.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.luck import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.make_worlds(**s.params.worlds, out=s.output[0]))
