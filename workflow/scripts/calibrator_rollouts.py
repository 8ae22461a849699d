"""Rule calibrator_rollouts: one Calibrator full-rollout cell on the history study's tasks."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import rollouts

s = snakemake  # noqa: F821
run_rule(s, lambda: rollouts.calibrator_rollouts(
    s.config, model=s.wildcards.model, env=s.wildcards.env, cell=s.params.cell,
    calibrator=s.params.cell["calibrator"]["name"], actor_prompts_dir=s.params.actor_prompts_dir,
    tasks_path=s.input.tasks, out_episodes=s.output.episodes, out_steps=s.output.steps, out_calls=s.output.calls))
