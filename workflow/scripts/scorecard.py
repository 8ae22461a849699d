"""Rule scorecard: each study's headline and the run's cost at one endpoint (workflow/rules/scorecard.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.pipeline.scorecard import write

s = snakemake  # noqa: F821
run_rule(s, lambda: write(model=s.wildcards.model, plans=list(s.params.plans), records=list(s.input.records),
                          cache=dict(s.params.cache), out_md=s.output.md, out_html=s.output.html))
