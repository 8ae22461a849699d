"""Rule luck_reimpl: the independent re-implementation of the registered analysis and its
comparison, REIMPL_COMPARISON.json (workflow/rules/luck.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from pathlib import Path

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.luck import reimpl_compare

s = snakemake  # noqa: F821
run_rule(s, lambda: reimpl_compare.write_comparison(
    worlds=s.input.worlds, answers=list(s.input.answers), analysis_dir=str(Path(s.input.registered).parent),
    rules=s.params.rules, out=s.output[0]))
