"""Rule calibrator_labels: q(E) and the targets of every context (section 6.1)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.labels(contexts_path=s.input.contexts, generated_path=s.input.candidates,
                                 screen_path=s.input.screen, compare_paths=list(s.input.compare), out=s.output[0]))
