"""Rule antipersist_eval: one frozen held-out evaluation (workflow/rules/antipersist.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.antipersist import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.evaluation(
    s.config, model=s.wildcards.model, env=s.wildcards.env, design=s.wildcards.design, seed=s.wildcards.seed,
    cell=s.params.cell, prompts_dir=s.params.prompts_dir, actor_prompts_dir=s.params.actor_prompts_dir,
    tasks_path=s.input.tasks, memory_path=s.input.memory, out_episodes=s.output.episodes, out_steps=s.output.steps,
    out_calls=s.output.calls, out_record=s.output.record, rounds_path=s.input.rounds,
    every_round=s.params.every_round))
