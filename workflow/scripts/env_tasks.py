"""Rule env_tasks: write results/tasks/{env}.parquet (see workflow/rules/envs.smk)."""

from hindsight.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: hindsight.jobserver)

from hindsight.envs.build import build_task_table
from hindsight.envs.tasks import write_table
from hindsight.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: write_table(build_task_table(name=s.wildcards.env, envs_cfg=s.params.envs), s.output[0]))
