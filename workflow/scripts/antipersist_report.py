"""Rule antipersist_report: tables and figures (workflow/rules/antipersist.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.antipersist import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.report(eval_paths=list(s.input.eval), train_paths=list(s.input.train),
                                 tables_dir=s.params.tables_dir, figures_dir=s.params.figures_dir,
                                 index=s.output.index, memory_paths=list(s.input.memory),
                                 sweeps=s.params.sweeps))
