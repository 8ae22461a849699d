"""Rule playbook_report: tables, figures and per-setting records (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
i = s.input
run_rule(s, lambda: entry.report(
    growth=list(i.growth), playbooks=list(i.playbooks), practice=list(i.practice), choice=list(i.choice),
    evals=list(i.eval), calls=list(i.calls), tables_dir=s.params.tables_dir, figures_dir=s.params.figures_dir,
    out_index=s.output.index, baselines=list(i.baselines)))
