"""Rule history_probe: the repetition probe of one Raw cell (workflow/rules/history.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history import entry

s = snakemake  # noqa: F821
run_rule(s, lambda: entry.probe(
    s.config, model=s.wildcards.model, env=s.wildcards.env, cell=s.params.cell,
    actor_prompts_dir=s.params.actor_prompts_dir, prompts_dir=s.params.prompts_dir, episodes_path=s.input.episodes,
    steps_path=s.input.steps, out_responses=s.output.responses, out_screen=s.output.screen, out_calls=s.output.calls))
