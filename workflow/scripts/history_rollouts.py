"""Rule history_rollouts: one full-rollout cell (workflow/rules/history.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.rollouts(
    s.config, model=s.wildcards.model, env=s.wildcards.env, condition=s.wildcards.condition,
    cell=s.params.cell, actor_prompts_dir=s.params.actor_prompts_dir, tasks_path=s.input.tasks,
    out_episodes=s.output.episodes, out_steps=s.output.steps, out_calls=s.output.calls))
