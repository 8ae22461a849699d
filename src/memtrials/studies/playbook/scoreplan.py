"""What the playbook study puts on the scorecard (README, "The scorecard"): its quantities, the
files and settings its headline reads (``studies/playbook/headline.py``) and every job's calls
file, for :class:`.workflow.PlaybookWorkflow` (the study interface's scorecard methods,
:class:`memtrials.pipeline.study.Study`).  Table 1's standard-growth settings of the endpoint."""

from __future__ import annotations

from typing import Any, Mapping


class ScorecardPlan:
    """The scorecard methods of the playbook study (mixed into its workflow class, which gives
    ``models``, ``config``, ``settings``, ``base``, ``candidates``, ``report_inputs``,
    ``baseline_paths``, ``baseline_methods`` and ``final_targets``)."""

    headline_quantities = ("RBC minus Whole: evaluation score (0-100), paired by task",
                           "RBC minus No playbook: evaluation score (0-100), paired by task")
    models: list[str]
    config: Any
    settings: Any
    base: Any
    candidates: Any
    report_inputs: Any
    baseline_paths: Any
    baseline_methods: Any
    final_targets: Any

    def headline_gap(self, model: str) -> str | None:
        if model not in self.models:
            return f"{model} is not in playbook.models (null: the panel); add it there"
        return None if self.headline_inputs(model)["choice"] else \
            f"every standard-growth setting of {model} is left out (playbook.envs, playbook.exclude)"

    def headline_inputs(self, model: str) -> dict[str, list[str]]:
        keys = [k for k in self.settings() if k[:2] == ("std", model)]
        return {"choice": [f"{self.base(*k)}/choice.json" for k in keys],
                "eval": [f"{self.base(*k)}/eval/{c}.parquet" for k in keys for c in self.candidates("std")]}

    def headline_options(self) -> dict[str, Any]:
        return {"n_boot": int(self.config["scorecard"]["n_boot"])}

    def record_files(self) -> list[str]:
        """Growth, practice, choice, evaluation, the pooled round and the baselines (with selection)."""
        if not self.final_targets():
            return []
        base = self.baseline_paths("calls")
        pooled = [f"{self.base(g, m, e, v)}/pooled/practice{x}.calls.parquet" for g, m, e, v in self.settings()
                  if g == "std" and "pooled" in self.baseline_methods(e, v) for x in ("", ".merge")]
        return sorted({*self.report_inputs()["calls"], *base, *pooled,
                       *(p.removesuffix(".calls.parquet") + ".select.calls.parquet" for p in base)})


class EstimatePlan:
    """The cost estimate's methods of the playbook study (``python -m memtrials estimate``;
    :mod:`.workload` counts the design)."""

    def workload(self) -> list[Any]:
        from memtrials.studies.playbook.workload import workload

        return workload(self)

    def profile_key(self, cell_id: str, purpose: str) -> tuple[str, str]:
        from memtrials.studies.playbook.workload import profile_key

        return profile_key(cell_id, purpose)

    def design_figures(self, measured: Mapping[str, Any]) -> dict[str, Any]:
        from memtrials.studies.playbook.workload import design_figures

        return design_figures(self, measured)
