"""Rule calibrator_compare: one recipient actor's paired next actions and their blind judgements."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.compare_(
    s.config, actor=s.wildcards.model, judge=s.params.stage["judge"]["name"], contexts_path=s.input.contexts,
    generated_path=s.input.candidates, screen_path=s.input.screen, actor_prompts_dir=s.params.actor_prompts_dir,
    calibrator_prompts_dir=s.params.calibrator_prompts_dir, actor_cfg=s.params.stage["actor"]["settings"],
    judge_max_tokens=s.params.stage["max_tokens"], out=s.output.pairs, out_calls=s.output.calls))
