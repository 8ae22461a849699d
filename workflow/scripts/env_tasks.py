"""Rule env_tasks: write results/tasks/{env}.parquet (see workflow/rules/envs.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.envs.build import build_task_table
from memtrials.envs.tasks import write_table
from memtrials.pipeline.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: write_table(build_task_table(name=s.wildcards.env, envs_cfg=s.params.envs), s.output[0]))
