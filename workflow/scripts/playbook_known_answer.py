"""Rule playbook_known_answer: the study's jobs on the planted world, truth beside estimate (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.known_answer(
    s.config, tasks_path=s.input.tasks, root="results/playbook", out_dir=s.params.out_dir,
    actor_prompts_dir=s.params.actor_prompts_dir, memory_prompts_dir=s.params.memory_prompts_dir))
