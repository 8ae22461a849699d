"""Rule history_rollouts: one full-rollout cell (workflow/rules/history.smk)."""

from hindsight.cells import run_cell
from hindsight.studies.history import cells

s = snakemake  # noqa: F821
run_cell(lambda: cells.rollouts(
    s.config, model=s.wildcards.model, env=s.wildcards.env, condition=s.wildcards.condition,
    cell=s.params.cell, prompts_dir=s.params.prompts_dir, tasks_path=s.input.tasks,
    out_episodes=s.output.episodes, out_steps=s.output.steps, out_calls=s.output.calls), s.log[0])
