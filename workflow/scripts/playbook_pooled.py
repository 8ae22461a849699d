"""Rule playbook_pooled: the K runs pooled and one practice round over them (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
w = s.wildcards
run_rule(s, lambda: entry.pooled(
    s.config, model=w.model, env=w.env, variant=w.variant, growth=w.growth, cell=s.params.cell,
    actor_prompts_dir=s.params.actor_prompts_dir, tasks_path=s.input.tasks, playbooks=list(s.input.playbooks),
    out_playbooks=s.output.playbooks, out_blocks=s.output.blocks, out_design=s.output.design,
    out_estimates=s.output.estimates, out_episodes=s.output.episodes, out_steps=s.output.steps,
    out_calls=s.output.calls, out_record=s.output.record))
