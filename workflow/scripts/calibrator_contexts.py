"""Rule calibrator_contexts: decision contexts, evenly over source actors x environments."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.contexts(sources=list(s.params.sources), count=int(s.params.n_contexts),
                                   seed=int(s.params.seed), out=s.output[0]))
