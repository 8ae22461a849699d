"""Rule calibrator_report: the calibrator's tables and figures (workflow/rules/calibrator.smk)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

from memtrials.pipeline.rule_entry import run_rule
from memtrials.studies.history.calibrator.report import write_report

s = snakemake  # noqa: F821
run_rule(s, lambda: write_report(
    labels=s.input.labels, compare=list(s.input.compare), datasets=list(s.input.datasets), sft=list(s.input.sft),
    rollouts={k: list(v) for k, v in s.input.items() if k in ("raw", "causal") or k.startswith("calibrator")},
    calibrator=s.params.calibrator, joint=list(s.input.get("joint", [])), trained=dict(s.params.trained_endpoints), served=list(s.params.served), tables_dir=s.params.tables_dir,
    figures_dir=s.params.figures_dir, index_path=s.output.index,
    ablation={k[len("ablation_"):]: list(v) for k, v in s.input.items() if k.startswith("ablation_")},
    ablation_endpoints=dict(s.params.ablation),
    arms={k[len("arm_"):]: list(v) for k, v in s.input.items() if k.startswith("arm_")}))
