"""Rule env_webshop_data: verify WebShop's data and build its search index (see workflow/rules/envs.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.envs.build import setup_webshop
from memtrials.pipeline.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: setup_webshop(envs_cfg=s.params.envs, out=s.output.setup))
