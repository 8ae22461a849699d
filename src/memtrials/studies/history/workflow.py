"""What ``workflow/rules/history.smk`` asks of the config: cell lists, the config slice that
determines each cell's output (never a key), and the checks that fail before any job
(:class:`HistoryWorkflow`, a :class:`memtrials.pipeline.study.Study`).

Every value comes from the ``history:`` section of the config (``config/config.yaml``,
whose schema marks each key required): this module holds no second default.
"""

from __future__ import annotations

from typing import Any

from memtrials.config import ConfigError
from memtrials.envs.catalog import source_options
from memtrials.memory.registry import check_memory, memory_entry, memory_name, source_files
from memtrials.pipeline.study import Study, alternatives, design_gap
from memtrials.studies.history.continuation import served_memory
from memtrials.studies.history.design import rollout_conditions
from memtrials.studies.history.planted_cells import PLANTED_ENV, check_planted, planted_available, planted_cell
from memtrials.studies.history.preflight import check_history_envs, check_named_tasks, check_task_types


class HistoryWorkflow(Study):
    """The history section of one config (``self.h``), resolved."""

    name = "history"
    package = "memtrials.studies.history"
    parts = ("rollouts", "continuation", "probe", "report")
    # each cell part: its module and the design; the report: its module
    code_modules = {"rollouts": ("rollouts", "design"), "continuation": ("continuation", "design"),
                    "probe": ("probe", "design"), "report": ("report", "planted_report", "planted_truth")}
    entry_parts = ("rollouts", "continuation", "probe")
    headline_quantities = ("Causal Transition minus Raw: task success, paired by task",)

    def resolve(self) -> None:
        config = self.config
        self.h = self.section
        self.models = list(self.h["models"] or config["panel"])  # null: the top-level panel
        self.envs = list(self.h["envs"])
        self.conditions = rollout_conditions(self.h)
        self.prompts_dir = str(self.h["prompts_dir"])
        self.actor_prompts_dir = str(self.h["actor_prompts_dir"])
        self.cont = dict(self.h["continuation"])
        self.cont_conditions = list(self.cont["conditions"]) + [f"{c}-chat" for c in self.cont["chat_conditions"]]
        self.cont_enabled = bool(self.cont["enabled"]) and bool(self.cont_conditions)
        # memory-<name>[-chat]: a user's memory served at resumption (rule history_continuation_memory)
        self.memory_conditions = [c for c in self.cont_conditions if served_memory(c) is not None]
        self.view_conditions = [c for c in self.cont_conditions if c not in self.memory_conditions]
        self.probe = dict(self.h["probe"])
        self.probe_enabled = bool(self.probe["enabled"])
        self.roles = dict(config["roles"])
        # known-answer runs: the planted agent's rollout cells on the planted world (docs/history.md)
        self.planted = dict(self.h["planted"])
        self.planted_model = str(self.planted["model"])
        # a registry without the planted entry (a test's, a user's own) runs no planted cells: said, not an error
        self.planted_enabled = bool(self.planted["enabled"]) and planted_available(
            self.planted_model, self.models_registry, config["models_file"])
        self.planted_conditions = list(self.planted["conditions"]) if self.planted_enabled else []
        self.rule_envs = self.envs + ([PLANTED_ENV] if self.planted_enabled and PLANTED_ENV not in self.envs else [])
        self.rule_conditions = list(dict.fromkeys(self.conditions + self.planted_conditions))

    def check(self) -> None:
        src = "config key history"
        for env in self.envs:
            if env not in self.h["splits"]:
                raise ConfigError(f"config key history.splits: no entry for environment {env!r} (listed in "
                                  f"history.envs); add `{env}: <split>` (null: every split of its task table)")
        for m in self.models:
            if m not in self.models_registry:
                raise ConfigError(f"{src}.models (or panel): endpoint '{m}' is not in the registry "
                                  f"({self.config['models_file']}); add an entry there or remove the name")
        if self.cont_enabled and any(c.partition("-")[0] == "calibrator" for c in self.cont_conditions) \
                and "calibrator" not in self.roles:
            raise ConfigError("config key history.continuation.conditions lists 'calibrator', which needs "
                              "roles.calibrator: add `roles: {calibrator: <endpoint>}` or drop the condition")
        if self.cont_enabled and self.memory_conditions:
            self.check_memories()
        if self.probe_enabled and "judge" not in self.roles:
            raise ConfigError("config key history.probe.enabled needs roles.judge (the screen of Appendix B.1): "
                              "add `roles: {judge: <endpoint>}` or set history.probe.enabled: false")
        for role in ("judge", "calibrator"):
            if role in self.roles and self.roles[role] not in self.models_registry:
                raise ConfigError(f"config key roles.{role}: endpoint '{self.roles[role]}' is not in the registry")
        if self.planted_enabled:
            check_planted(self.h, self.models_registry, self.config["models_file"])
        check_task_types(self.h, self.config["envs"])  # the type lists first: the split sizes count with them
        check_history_envs(self.h, self.config["envs"])
        check_named_tasks(self.h, self.config["envs"])

    def check_memories(self) -> None:
        """The user memories the continuation serves (:mod:`memtrials.memory.registry`), and the
        embedder their context names."""
        for key in ("conditions", "chat_conditions"):
            for c in self.cont[key]:
                if memory_name(c) is not None:
                    check_memory(self.config, c, f"history.continuation.{key}",
                                 user="the history study's continuation")
        if "embedder" not in self.roles:
            raise ConfigError("config key history.continuation.conditions lists a memory, whose context names "
                              "roles.embedder: add `roles: {embedder: <endpoint>}` (e.g. minilm)")

    def memory_code(self, condition: str) -> list[str]:
        """The module file of a memory condition's user memory (its rule's ``code`` input too)."""
        served = served_memory(condition)
        return source_files(self.config, served[0]) if served else []

    def prompt_files(self) -> list[str]:
        """The study's own prompt files (the repetition screen's: the probe reads them)."""
        from memtrials.studies.history.prompts import PROMPT_FILES

        return [f"{self.prompts_dir}/{f}" for f in PROMPT_FILES]

    def in_flight(self) -> int:
        return int(self.h["in_flight"])

    def actor_prompt_files(self) -> list[str]:
        """The actor's prompt files (every rule that runs the actor, the calibrator's too)."""
        from memtrials.agent.prompts import PROMPT_FILES

        return [f"{self.actor_prompts_dir}/{f}" for f in PROMPT_FILES]

    def cell(self, model: str, env: str, part: str | None = None, condition: str | None = None) -> dict[str, Any]:
        """Everything of the config that determines one cell's output (a memory condition's
        continuation also its memory's config entry and the embedder; the planted world's
        rollouts: :func:`planted_cell`)."""
        if env == PLANTED_ENV and env not in self.envs:
            return planted_cell(self.h, self.endpoint(model))
        cell: dict[str, Any] = {
            "seed": self.h["seed"], "tasks_per_cell": self.h["tasks_per_cell"],
            "chat_tasks_per_cell": self.h["chat_tasks_per_cell"],
            "split": self.h["splits"][env],
            "task_types": (self.h["task_types"] or {}).get(env),  # null / absent: every type
        }
        named = (self.h["tasks"] or {}).get(env)
        if named is not None:  # history.tasks: the cell plays these (null: the seeded draw above)
            cell["tasks"] = list(named)
        cell.update({
            # per environment, optional; official data adds {"official": True} (envs.<env>.source)
            "env_options": {**source_options(env, self.config["envs"]), **(self.h["env_options"].get(env) or {})},
            "actor": self.h["actor"], "in_flight": self.h["in_flight"],
            "endpoint": self.endpoint(model),
        })
        if part is None:  # rollouts: how Shuffle-All / Shuffle-Old draw their permutations
            cell["shuffle"] = self.h["shuffle"]
        if part == "continuation":
            cell["continuation"] = {k: self.cont[k] for k in ("sources_per_cell", "min_source_steps")}
            if "calibrator" in self.roles:
                cell["calibrator"] = {"name": self.roles["calibrator"], **self.endpoint(self.roles["calibrator"])}
            served = served_memory(condition or "")
            if served is not None:
                cell["memory"] = memory_entry(self.config, str(memory_name(served[0])))
                cell["embedder"] = {"name": self.roles["embedder"], **self.endpoint(self.roles["embedder"])}
        if part == "probe":
            cell["probe"] = {"conditions": list(self.probe["conditions"])}
            judge = self.roles.get("judge")
            cell["judge"] = {"name": judge, **(self.endpoint(judge) if judge else {})}
        return cell

    def final_targets(self) -> list[str]:
        """What the target rule ``all`` asks of this study (none when disabled or empty)."""
        if not (self.enabled and self.models and self.envs):
            return []
        return ["results/history/tables/index.md"]

    # -- the scorecard (studies/history/headline.py) ---------------------------------------
    def headline_gap(self, model: str) -> str | None:
        return design_gap(model, self.models, self.envs, ("raw", "causal"), self.conditions, section=self.name,
                          arms_key="history.conditions")

    def headline_inputs(self, model: str) -> dict[str, list[str]]:
        return {c: [f"results/history/rollouts/{model}/{e}/{c}.parquet" for e in self.envs] for c in ("raw", "causal")}

    def headline_options(self) -> dict[str, Any]:
        return {"n_boot": int(self.h["analysis"]["n_boot"])}

    def record_files(self) -> list[str]:
        if not self.final_targets():
            return []
        cells = [p for key, ps in self.report_inputs().items() if key != "planted_tasks" for p in ps]  # cells only
        return [p.removesuffix(".parquet") + ".calls.parquet" for p in cells]

    def workload(self) -> list[Any]:
        """Per model and environment: one rollout job per condition (``tasks_per_cell``
        episodes, ``chat_tasks_per_cell`` in chat format, each up to ``actor.max_actions``
        actor calls; Experience reviews each step), one continuation job per condition
        (``sources_per_cell`` resumed episodes; Experience and Calibrator review, the latter
        on ``roles.calibrator``) and one probe job (repeat pairs of the Raw episodes: a judge
        screen each, then one actor reply per probe condition, Experience's after a review)."""
        from memtrials.pipeline.workload import Work

        if not (self.enabled and self.models and self.envs):
            return []
        steps, flight = int(self.h["actor"]["max_actions"]), int(self.h["in_flight"])
        tasks = int(self.h["tasks_per_cell"])
        chat_tasks = int(self.h["chat_tasks_per_cell"] or tasks)
        out: list[Work] = []
        for m in self.models:
            for env in self.envs:
                for c in self.conditions:
                    view, fmt = c.partition("-")[0], ("chat" if c.endswith("-chat") else "block")
                    n, cell = (chat_tasks if fmt == "chat" else tasks), f"history/rollouts/{m}/{env}/{c}"
                    out.append(Work("rollouts", m, "actor", units=n, steps=steps, jobs=1, episodes=n, in_flight=flight,
                                    cell=cell))
                    if view == "experience":
                        out.append(Work("rollouts", m, "review", units=n, steps=steps, cell=cell))
                if self.cont_enabled:
                    n = int(self.cont["sources_per_cell"])
                    for c in self.cont_conditions:
                        view, cell = c.partition("-")[0], f"history/continuation/{m}/{env}/{c}"
                        out.append(Work("continuation", m, "actor", units=n, steps=steps, jobs=1, episodes=n,
                                        in_flight=flight, cell=cell))
                        if view in ("experience", "calibrator"):
                            reviewer = self.roles["calibrator"] if view == "calibrator" else m
                            out.append(Work("continuation", reviewer, "review", units=n, steps=steps, cell=cell))
                if self.probe_enabled:
                    conds, cell = list(self.probe["conditions"]), f"history/probe/{m}/{env}"
                    out.append(Work("probe", m, "", jobs=1, cell=cell))
                    out.append(Work("probe", self.roles["judge"], "judge", units=tasks, steps=steps, cell=cell))
                    out.append(Work("probe", m, "actor", units=tasks * len(conds), steps=steps, cell=cell))
                    if "experience" in conds:
                        out.append(Work("probe", m, "review", units=tasks, steps=steps, cell=cell))
        return out

    def profile_key(self, cell_id: str, purpose: str) -> tuple[str, str]:
        """The calibrator study's cells played by the rollout code (conditions ``calibrator*``)
        measure apart: ``calibrator-rollouts`` (what its workload reads)."""
        parts = cell_id.split("/")
        if parts[1] == "rollouts" and len(parts) > 4 and parts[4].startswith("calibrator"):
            return "calibrator-rollouts", purpose
        return parts[1], purpose

    def report_inputs(self) -> dict[str, list[str]]:
        out = {"rollouts": [f"results/history/rollouts/{m}/{e}/{c}.parquet"
                            for m in self.models for e in self.envs for c in self.conditions]}
        if self.cont_enabled:
            out["continuation"] = [f"results/history/continuation/{m}/{e}/{c}.parquet"
                                   for m in self.models for e in self.envs for c in self.cont_conditions]
        if self.probe_enabled:
            out["probe"] = [f"results/history/probe/{m}/{e}.parquet" for m in self.models for e in self.envs]
        if self.planted_enabled:
            out["planted"] = [f"results/history/rollouts/{self.planted_model}/{PLANTED_ENV}/{c}.parquet"
                              for c in self.planted_conditions]
            out["planted_tasks"] = [f"results/tasks/{PLANTED_ENV}.parquet"]
        return out

    def planted_slice(self) -> dict[str, Any]:
        """What of the config decides the planted tables (the report's params): the cell's
        task draw, the actor's budget and the planted entry's declared numbers."""
        if not self.planted_enabled:
            return {}
        declared = self.models_registry[self.planted_model].planted.params
        return {**planted_cell(self.h, self.endpoint(self.planted_model)), "model": self.planted_model,
                "conditions": self.planted_conditions, "declared": dict(declared)}

    alternatives = staticmethod(alternatives)
