"""Rule playbook_growth: one growth run (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
w = s.wildcards
run_rule(s, lambda: entry.growth(
    s.config, model=w.model, env=w.env, variant=w.variant, growth=w.growth, run=int(w.k), cell=s.params.cell,
    prompts_dir=s.params.prompts_dir, actor_prompts_dir=s.params.actor_prompts_dir, tasks_path=s.input.tasks,
    out_playbooks=s.output.playbooks, out_episodes=s.output.episodes, out_steps=s.output.steps,
    out_calls=s.output.calls, out_record=s.output.record))
