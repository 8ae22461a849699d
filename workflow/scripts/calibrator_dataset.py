"""Rule calibrator_dataset: one variant's SFT dataset (chat-format JSONL and Parquet)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.dataset_(contexts_path=s.input.contexts, labels_path=s.input.labels,
                                   actor_prompts_dir=s.params.actor_prompts_dir, variant=s.wildcards.variant,
                                   out_jsonl=s.output.jsonl, out_parquet=s.output.parquet))
