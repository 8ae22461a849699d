"""Rule smoke: ask one endpoint a fixed question (see workflow/rules/smoke.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.smoke import ask

s = snakemake  # noqa: F821
run_rule(s, lambda: ask(
    s.config, model=s.wildcards.model, question=s.params.question, max_tokens=s.params.max_tokens,
    out_path=s.output.answer, records_path=s.output.calls))
