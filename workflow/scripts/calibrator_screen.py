"""Rule calibrator_screen: the judge role screens every candidate experience."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.screen_(
    s.config, judge=s.wildcards.model, contexts_path=s.input.contexts, generated_path=s.input.candidates,
    actor_prompts_dir=s.params.actor_prompts_dir, calibrator_prompts_dir=s.params.calibrator_prompts_dir,
    max_tokens=s.params.stage["max_tokens"], out=s.output.screen, out_calls=s.output.calls))
