"""What ``workflow/rules/luck.smk`` asks of the config: the study's panel, the config slice
that the freeze registers (never a key), the code each rule depends on, the final targets,
and the checks that fail before any job (:class:`LuckWorkflow`, a
:class:`memtrials.pipeline.study.Study`).

Every value comes from the ``luck:`` section of the config (``config/config.yaml``, whose
schema marks each key required): this module holds no second default.
"""

from __future__ import annotations

from typing import Any

from memtrials.config import ConfigError
from memtrials.pipeline.study import Study
from memtrials.studies.luck.codeset import PARTS
from memtrials.studies.luck.outputs import HEADLINE

RESULTS = "results/luck"
REGISTERED = f"{RESULTS}/freeze/registered.json"
TABLE_FORMATS = ("md", "csv", "tex", "html")
FIGURE_FORMATS = ("png", "svg")


class LuckWorkflow(Study):
    """The ``luck`` section of one config (``self.luck``), resolved."""

    name = "luck"
    package = "memtrials.studies.luck"
    parts = PARTS
    headline_quantities = tuple(HEADLINE.values())

    def resolve(self) -> None:
        self.luck = self.section
        self.panel = list(self.luck["panel"] or self.config["panel"])
        self.prompts_dir = str(self.luck["prompts_dir"])
        self.registered = REGISTERED

    def check(self) -> None:
        src = self.config["models_file"]
        for m in self.panel:
            if m not in self.models_registry:
                raise ConfigError(f"config key luck.panel (or panel): endpoint '{m}' is not in {src}; "
                                  "add an entry there or remove the name")
        ka = self.luck["known_answer"]
        if ka["enabled"]:  # left out where the registry lacks it (known_paths, known_cell ask the registry)
            from memtrials.studies.luck.planted import PlantedLuck

            self.planted_entry("luck.known_answer.endpoint", ka["endpoint"], PlantedLuck.from_params)

    # -- what the rules read ---------------------------------------------------------------
    def worlds(self) -> dict[str, Any]:
        """Keyword arguments of :func:`memtrials.studies.luck.entry.make_worlds`."""
        w = self.luck["worlds"]
        return {"seed": int(self.luck["seed"]), "domains": int(w["domains"]),
                "per_domain": int(w["per_domain"]), "margin": float(w["margin"])}

    def known_cell(self) -> dict[str, Any]:
        """What decides the known-answer run's outputs (its rule's params): the
        ``luck.known_answer`` block, the planted entry's params (the truth) and identity."""
        ka = self.luck["known_answer"]
        if not (ka["enabled"] and ka["endpoint"] in self.models_registry):  # off, or left out (check's warning)
            return {}
        ep = self.models_registry[ka["endpoint"]]
        return {"cell": dict(ka), "params": dict(ep.planted.params), "endpoint": self.endpoint(ka["endpoint"]),
                "rules": self.analysis_rules()}

    def max_tokens(self, role: str) -> int | None:
        """The output cap a writer or reader request overrides (None: the endpoint's own)."""
        return self.luck[role]["max_tokens"]

    def analysis_rules(self) -> dict[str, Any]:
        return dict(self.luck["analysis"])

    def prompt_files(self) -> list[str]:
        from memtrials.studies.luck.prompts import PROMPT_FILES

        return [f"{self.prompts_dir}/{f}" for f in PROMPT_FILES]

    def slice(self) -> dict[str, Any]:
        """Everything of the config that determines the study's outputs (never a key): the
        ``luck`` section, the resolved panel, and per endpoint its identity, provider pin
        (``extra_body``), declared parameters and the request parameters each role sends."""
        from memtrials.studies.luck.freeze import sent_params

        endpoints = {}
        for m in self.panel:
            ep = self.models_registry[m]
            endpoints[m] = {
                **self.endpoint(m), "provider": ep.provider, "extra_body": dict(ep.extra_body),
                "grammar": bool(ep.grammar),
                "sent": {role: sent_params(ep, self.max_tokens(role)) for role in ("writer", "reader")},
            }
        # the known-answer run is not part of the registered protocol (its own worlds and endpoint)
        luck = {k: v for k, v in self.luck.items() if k != "known_answer"}
        return {"luck": luck, "panel": self.panel, "endpoints": endpoints}

    @classmethod
    def code(cls, part: str) -> list[str]:
        """Source files that determine a part's outputs (inputs of its rule; the freeze
        hashes the same list, see :data:`memtrials.studies.luck.freeze.CODE_FILES`)."""
        if part == "known":
            from memtrials.studies.luck.codeset import known_files

            return list(known_files())
        from memtrials.studies.luck.freeze import code_files

        return code_files(part)

    # -- the workload (python -m memtrials estimate) -----------------------------------------
    def workload(self) -> list[Any]:
        """Per panel endpoint: one writers job (12 lessons a world: 3 instructions x 2
        decisions x 2 outcomes) and one readers job (32 requests a world: 2 decisions x 2
        previous outcomes x 8 memory arms), :mod:`memtrials.studies.luck.design`; a job's
        calls are independent, so it keeps the endpoint's concurrency busy."""
        from memtrials.pipeline.workload import Work
        from memtrials.studies.luck.design import ARMS, DECISIONS, INSTRUCTIONS, OUTCOMES

        if not self.enabled:
            return []
        w = self.worlds()
        worlds = w["domains"] * w["per_domain"]
        lessons = len(INSTRUCTIONS) * len(DECISIONS) * len(OUTCOMES)
        requests = len(DECISIONS) * len(OUTCOMES) * len(ARMS)
        return [row for m in self.panel for row in (
            Work("writers", m, "writer", units=worlds * lessons, jobs=1, in_flight=self.api(m), cell=f"luck/{m}/writers"),
            Work("readers", m, "reader", units=worlds * requests, jobs=1, in_flight=self.api(m),
                 cell=f"luck/{m}/readers"))]

    def profile_key(self, cell_id: str, purpose: str) -> tuple[str, str]:
        """``luck/<model>/writers`` and purpose ``luck/writer/RB`` -> ``("writers", "writer")``."""
        return cell_id.rsplit("/", 1)[-1], purpose.split("/")[1] if purpose.count("/") >= 1 else purpose

    # -- outputs ---------------------------------------------------------------------------
    @staticmethod
    def tables() -> list[str]:
        from memtrials.studies.luck.outputs import REPORT_TABLES

        return list(REPORT_TABLES)

    @staticmethod
    def analysis_tables() -> list[str]:
        from memtrials.studies.luck.outputs import ANALYSIS_TABLES

        return list(ANALYSIS_TABLES)

    def table_paths(self) -> list[str]:
        return ([f"{RESULTS}/tables/{t}.{ext}" for t in self.tables() for ext in TABLE_FORMATS]
                + [f"{RESULTS}/tables/registered_supplement.md"])

    def figure_paths(self) -> list[str]:
        return [f"{RESULTS}/figures/figure1_p2_p3m.{ext}" for ext in FIGURE_FORMATS]

    def per_model(self, name: str) -> list[str]:
        return [f"{RESULTS}/{m}/{name}" for m in self.panel]

    # -- the scorecard ---------------------------------------------------------------------
    def headline_gap(self, model: str) -> str | None:
        if model not in self.panel:
            return f"{model} is not in the luck study's panel; add it to luck.panel (or panel when luck.panel is null)"
        return None

    def headline_inputs(self, model: str) -> dict[str, list[str]]:
        return {"registered": [f"{RESULTS}/analysis/registered.json"],
                "quantities": [f"{RESULTS}/analysis/quantities.parquet"],
                "readings": [f"{RESULTS}/analysis/readings.parquet"]}

    def record_files(self) -> list[str]:
        if not self.enabled:
            return []
        return self.per_model("lessons.calls.parquet") + self.per_model("answers.calls.parquet")

    def known_paths(self) -> list[str]:
        """The known-answer run's tables (none when ``luck.known_answer.enabled`` is false)."""
        ka = self.luck["known_answer"]
        if not (self.enabled and ka["enabled"] and ka["endpoint"] in self.models_registry):
            return []
        return [f"{RESULTS}/tables/{t}.{ext}" for t in ("known_answer", "known_answer_cells") for ext in TABLE_FORMATS]

    def final_targets(self) -> list[str]:
        if not self.enabled:
            return []
        return ([f"{RESULTS}/freeze/manifest.json", f"{RESULTS}/analysis/registered.json",
                 f"{RESULTS}/analysis/REIMPL_COMPARISON.json"] + self.table_paths() + self.figure_paths()
                + self.known_paths())

