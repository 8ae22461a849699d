"""Rule luck_writers: 12 lessons per world for one endpoint (workflow/rules/luck.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.luck import entry
from memtrials.studies.luck.freeze import refusing

s = snakemake  # noqa: F821
run_rule(s, refusing(lambda: entry.writers(
    config=s.config, model=s.wildcards.model, worlds=s.input.worlds, prompts_dir=s.params.prompts_dir,
    config_slice=s.params.slice, registered=s.params.registered, max_tokens=s.params.max_tokens,
    out=s.output.lessons, calls=s.output.calls)))
