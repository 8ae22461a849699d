"""Rule luck_worlds: generate the worlds table (workflow/rules/luck.smk)."""

from hindsight.cells import run_cell
from hindsight.studies.luck import run

s = snakemake  # noqa: F821
run_cell(lambda: run.make_worlds(**s.params.worlds, out=s.output[0]), s.log[0])
