"""Rule env_alfworld_games: generate the offline ALFWorld games (see workflow/rules/envs.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.envs.build import generate_alfworld
from memtrials.pipeline.rule_entry import run_rule

s = snakemake  # noqa: F821
run_rule(s, lambda: generate_alfworld(
    envs_cfg=s.params.envs, out_dir=s.output.games, manifest=s.output.manifest, workers=s.threads))
