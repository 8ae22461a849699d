"""Rule luck_report: Tables 1-8 (+ supplement tables) and Figure 1 (workflow/rules/luck.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from pathlib import Path

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.luck import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.report(analysis_dir=str(Path(s.input.registered).parent),
                               tables_dir=str(Path(s.output.tables[0]).parent), figures=list(s.output.figures)))
