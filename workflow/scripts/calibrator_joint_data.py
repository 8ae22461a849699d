"""Rule calibrator_joint_data: the joint actor's and the action-only baseline's training data (section 6.4)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator.joint import write_joint_data

s = snakemake  # noqa: F821
run_rule(s, lambda: write_joint_data(calibrator_rollouts=list(s.input.calibrator), raw_rollouts=list(s.input.raw),
                                     out_joint=s.output.joint, out_action_only=s.output.action_only,
                                     actor_prompts_dir=s.params.actor_prompts_dir,
                                     calibrator_prompts_dir=s.params.calibrator_prompts_dir))
