"""Rule env_alfworld_games: generate the offline ALFWorld games (see workflow/rules/envs.smk)."""

from hindsight.cells import run_cell
from hindsight.envs.pipeline import generate_alfworld

s = snakemake  # noqa: F821
run_cell(lambda: generate_alfworld(
    envs_cfg=s.params.envs, out_dir=s.output.games, manifest=s.output.manifest, workers=s.threads), s.log[0])
