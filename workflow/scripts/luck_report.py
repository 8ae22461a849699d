"""Rule luck_report: Tables 1-5 (+ supplement tables) and Figure 1 (workflow/rules/luck.smk)."""

from pathlib import Path

from hindsight.cells import run_cell
from hindsight.studies.luck import run

s = snakemake  # noqa: F821
run_cell(lambda: run.report(analysis_dir=str(Path(s.input.registered).parent),
                            tables_dir=str(Path(s.output.tables[0]).parent), figures=list(s.output.figures)),
         s.log[0])
