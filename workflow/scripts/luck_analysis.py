"""Rule luck_analysis: verify the freeze, lock the records, run the registered analysis
over the luck panel (workflow/rules/luck.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from pathlib import Path

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.luck import entry
from memtrials.studies.luck.freeze import refusing

s = snakemake  # noqa: F821
run_rule(s, refusing(lambda: entry.analysis(
    worlds=s.input.worlds, answers=list(s.input.answers), lessons=list(s.input.lessons),
    prompts_dir=s.params.prompts_dir, config_slice=s.params.slice, registered=s.params.registered,
    rules=s.params.rules, outdir=str(Path(s.output.registered).parent))))
