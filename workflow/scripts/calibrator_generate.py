"""Rule calibrator_generate: the generator role reviews every context (Appendix G.2)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.generate_(
    s.config, generator=s.wildcards.model, contexts_path=s.input.contexts, actor_prompts_dir=s.params.actor_prompts_dir,
    max_tokens=s.params.stage["max_tokens"], out=s.output.candidates, out_calls=s.output.calls))
