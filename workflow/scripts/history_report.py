"""Rule history_report: tables and figures of the history study (workflow/rules/history.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.report import write_report

s = snakemake  # noqa: F821
run_rule(s, lambda: write_report(
    rollouts=list(s.input.rollouts), continuation=list(s.input.get("continuation", [])),
    probe=list(s.input.get("probe", [])), analysis=s.params.analysis,
    planted=list(s.input.get("planted", [])), planted_tasks=(list(s.input.get("planted_tasks", [])) or [None])[0],
    planted_slice=dict(s.params.planted), tables_dir=s.params.tables_dir,
    figures_dir=s.params.figures_dir, index_path=s.output.index,
    trained_calibrators=dict(s.params.trained_calibrators)))
