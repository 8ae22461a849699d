"""Rule playbook_diagnostics: tags vs effects, harmful blocks, subsampling, split-half (workflow/rules/playbook.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.playbook import entry

s = snakemake  # noqa: F821
i, p = s.input, s.params
run_rule(s, lambda: entry.diagnostics(
    playbooks=list(i.playbooks), practice=list(i.practice), choice=list(i.choice), evals=list(i.eval),
    tables_dir=s.output.tables, figures_dir=s.output.figures, out_index=s.output.index, halvings=p.halvings,
    seed=p.seed, budget=p.budget, rule=p.rule, subsampled_evals=list(i.get("subsampled", []))))
