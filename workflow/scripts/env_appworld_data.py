"""Rule env_appworld_data: build the offline AppWorld task set (see workflow/rules/envs.smk)."""

from hindsight.envs.build import build_appworld
from hindsight.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: build_appworld(envs_cfg=s.params.envs, data_dir=s.output.data, manifest=s.output.manifest,
                                   workers=int(s.threads)))
