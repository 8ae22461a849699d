"""Rule env_check: gold and random agents on a sample of each split (see workflow/rules/envs.smk)."""

from hindsight.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: hindsight.jobserver)

from hindsight.envs.build import run_envcheck
from hindsight.files import write_parquet
from hindsight.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: write_parquet(
    run_envcheck(name=s.wildcards.env, envs_cfg=s.params.envs, tasks_path=s.input.tasks),
    s.output[0]))
