"""Rule smoke: ask one endpoint a fixed question (see workflow/rules/smoke.smk)."""

from hindsight.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: hindsight.jobserver)

from hindsight.rule_entry import run_rule
from hindsight.studies.smoke import ask

s = snakemake  # noqa: F821
run_rule(s, lambda: ask(
    s.config, model=s.wildcards.model, question=s.params.question, max_tokens=s.params.max_tokens,
    out_path=s.output.answer, records_path=s.output.calls))
