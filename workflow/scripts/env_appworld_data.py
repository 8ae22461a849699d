"""Rule env_appworld_data: build the offline AppWorld task set (see workflow/rules/envs.smk)."""

from hindsight.cells import run_cell
from hindsight.envs.pipeline import build_appworld

s = snakemake  # noqa: F821
run_cell(lambda: build_appworld(envs_cfg=s.params.envs, data_dir=s.output.data, manifest=s.output.manifest),
         s.log[0])
