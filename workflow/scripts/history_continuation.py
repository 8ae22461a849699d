"""Rule history_continuation: one reference-continuation cell (workflow/rules/history.smk)."""

from hindsight.cells import run_cell
from hindsight.studies.history import cells

s = snakemake  # noqa: F821
run_cell(lambda: cells.continuation(
    s.config, model=s.wildcards.model, env=s.wildcards.env, condition=s.wildcards.condition,
    cell=s.params.cell, prompts_dir=s.params.prompts_dir, episodes_path=s.input.episodes,
    steps_path=s.input.steps, out_episodes=s.output.episodes, out_steps=s.output.steps,
    out_calls=s.output.calls), s.log[0])
