"""Rule luck_freeze: register or verify the study's SHA-256 manifest (workflow/rules/luck.smk)."""

from hindsight.cells import run_cell
from hindsight.studies.luck import run
from hindsight.studies.luck.freeze import refusing

s = snakemake  # noqa: F821
run_cell(refusing(lambda: run.freeze(worlds=s.input.worlds, prompts_dir=s.params.prompts_dir,
                                     config_slice=s.params.slice, registered=s.params.registered,
                                     out=s.output[0])), s.log[0])
