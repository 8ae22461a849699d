"""Rule env_check: gold and random agents on a sample of each split (see workflow/rules/envs.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.envs.build import run_envcheck
from memtrials.io import write_parquet
from memtrials.pipeline.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: write_parquet(
    run_envcheck(name=s.wildcards.env, envs_cfg=s.params.envs, tasks_path=s.input.tasks),
    s.output[0]))
