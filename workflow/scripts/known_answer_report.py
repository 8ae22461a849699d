"""Rule known_answer_report: the "Known-answer runs" section (see workflow/rules/known_answer.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.report.known_answer import gather

s = snakemake  # noqa: F821
run_rule(s, lambda: gather(s.params.entries, s.output.md, s.output.html))
