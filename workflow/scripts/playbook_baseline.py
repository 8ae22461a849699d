"""Rule playbook_baseline: one baseline of one setting on the evaluation tasks (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
w = s.wildcards
run_rule(s, lambda: entry.baseline(
    s.config, model=w.model, env=w.env, variant=w.variant, growth=w.growth, method=w.method, cell=s.params.cell,
    actor_prompts_dir=s.params.actor_prompts_dir, prompts_dir=s.params.prompts_dir, tasks_path=s.input.tasks,
    playbooks=list(s.input.playbooks), practice_records=list(s.input.practice), choice_path=s.input.choice,
    pooled_record=(list(s.input.pooled) or [None])[0], out_episodes=s.output.episodes, out_steps=s.output.steps,
    out_calls=s.output.calls, out_record=s.output.record))
