"""Rule calibrator_joint_rollouts: one cell of the joint actor or the action-only baseline (section 6.4)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator.jointactor import joint_rollouts

s = snakemake  # noqa: F821
run_rule(s, lambda: joint_rollouts(
    s.config, arm=s.wildcards.arm, model=s.wildcards.model, env=s.wildcards.env, cell=s.params.cell,
    max_output_tokens=s.params.cell["max_output_tokens"], actor_prompts_dir=s.params.actor_prompts_dir,
    calibrator_prompts_dir=s.params.calibrator_prompts_dir, tasks_path=s.input.tasks,
    out_episodes=s.output.episodes, out_steps=s.output.steps, out_calls=s.output.calls))
