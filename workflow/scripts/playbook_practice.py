"""Rule playbook_practice: one practice round (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
w = s.wildcards
run_rule(s, lambda: entry.practice(
    s.config, model=w.model, env=w.env, variant=w.variant, growth=w.growth, run=int(w.k), cell=s.params.cell,
    actor_prompts_dir=s.params.actor_prompts_dir, tasks_path=s.input.tasks, playbooks_path=s.input.playbooks,
    out_blocks=s.output.blocks, out_design=s.output.design, out_estimates=s.output.estimates,
    out_episodes=s.output.episodes, out_steps=s.output.steps, out_calls=s.output.calls, out_record=s.output.record))
