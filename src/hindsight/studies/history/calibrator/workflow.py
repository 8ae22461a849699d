"""What ``workflow/rules/calibrator.smk`` asks of the config: the source, recipient and role
endpoints, the config slice of every job, the checks that fail before any job, the code
inputs and the final targets.  Every value comes from the ``calibrator:`` section (and the
``history:`` section it extends) of ``config/config.yaml``; no second default here."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from hindsight.config import ConfigError

PARTS = ("sources", "contexts", "generate", "screen", "compare", "labels", "dataset", "rollouts", "joint", "report")
NOT_CODE = ("hindsight.config", "hindsight.files", "hindsight.llm", "hindsight.rule_entry", "hindsight.testing")
STAGE_MODULE = {"sources": "entry", "contexts": "contexts", "generate": "generate", "screen": "screen",
                "compare": "compare", "labels": "dataset", "dataset": "dataset", "rollouts": "rollouts", "joint": "joint",
                "report": "report"}
VARIANTS = ("full", "screen_only")


class CalibratorWorkflow:
    """The calibrator section of one config, resolved."""

    def __init__(self, config: Mapping[str, Any], models: Mapping[str, Any],
                 endpoint: Callable[[str], Mapping[str, Any]]) -> None:
        if "calibrator" not in config:
            raise ConfigError("config key calibrator: missing; copy the calibrator section of config/config.yaml "
                              "(every key is required)")
        self.config, self.registry, self.endpoint = config, models, endpoint
        self.c = dict(config["calibrator"])
        self.h = dict(config["history"])
        self.enabled = bool(self.c["enabled"])
        history_models = list(self.h["models"] or config["panel"])
        self.history_models, self.history_envs = history_models, list(self.h["envs"])
        self.sources = list(self.c["sources"]["models"] or history_models)
        self.envs = list(self.c["sources"]["envs"])
        self.recipients = list(self.c["recipients"] or self.sources)
        self.variants = list(self.c["variants"])
        self.train = dict(self.c["train"])
        self.train_variants = list(self.train["variants"]) if self.train["enabled"] else []
        self.rollouts_enabled = bool(self.c["rollouts"]["enabled"])
        self.roles = dict(config["roles"])
        self.prompts_dir = str(self.c["prompts_dir"])
        if self.enabled:
            self.check()
        self.generator, self.judge = self.roles.get("generator"), self.roles.get("judge")

    def check(self) -> None:
        for role in ("generator", "judge") + (("calibrator",) if self.rollouts_enabled else ()):
            if role not in self.roles:
                raise ConfigError(f"config key roles.{role}: missing; the calibrator's labels need it "
                                  f"(add `roles: {{{role}: <endpoint>}}` or set calibrator.enabled: false)")
            if self.roles[role] not in self.registry:
                raise ConfigError(f"config key roles.{role}: endpoint '{self.roles[role]}' is not in the registry")
        for key, names in (("calibrator.sources.models", self.sources), ("calibrator.recipients", self.recipients)):
            for m in names:
                if m not in self.registry:
                    raise ConfigError(f"config key {key}: endpoint '{m}' is not in the registry; add an entry "
                                      f"to {self.config['models_file']} or remove the name")
        for env in self.envs:
            if env not in self.c["splits"]:
                raise ConfigError(f"config key calibrator.splits: no entry for environment {env!r}; add "
                                  f"`{env}: <training split>`")
            if env in self.h["splits"] and self.c["splits"][env] == self.h["splits"][env]:
                raise ConfigError(f"config key calibrator.splits.{env}: {self.c['splits'][env]!r} is also the "
                                  f"history evaluation split (history.splits.{env}); the calibrator's tasks must "
                                  "be disjoint from the evaluation tasks: name another split")
        bad = sorted(set(self.variants) - set(VARIANTS)) + sorted(set(self.train["variants"]) - set(self.variants))
        if bad:
            raise ConfigError(f"config key calibrator.variants / calibrator.train.variants: unknown or not built "
                              f"{bad}; allowed: {', '.join(VARIANTS)} (train.variants must be among variants)")

    def prompt_files(self) -> list[str]:
        from hindsight.studies.history.calibrator.prompts import PROMPT_FILES

        return [f"{self.prompts_dir}/{f}" for f in PROMPT_FILES]

    @staticmethod
    def code(part: str) -> list[str]:
        """Source files that decide a part's outputs (rule inputs: an edit reruns the part)."""
        from hindsight.sources import source_files

        if part not in PARTS:
            raise ValueError(f"calibrator: unknown part {part!r}; known: {', '.join(PARTS)}")
        pkg = "hindsight.studies.history.calibrator"
        return sorted({"src/hindsight/studies/history/calibrator/entry.py",
                       *source_files([f"{pkg}.{STAGE_MODULE[part]}"], exclude=NOT_CODE)})

    def api(self, model: str) -> int:
        return max(1, min(int(self.h["in_flight"]), int(self.registry[model].max_concurrency)))

    def role(self, name: str) -> dict[str, Any]:
        who = self.roles[name]
        return {"name": who, **self.endpoint(who)}

    def source_cell(self, model: str, env: str) -> dict[str, Any]:
        return {"seed": self.c["seed"], "split": self.c["splits"][env], "sources": dict(self.c["sources"]),
                "eval_split": self.h["splits"][env], "eval_seed": self.h["seed"],
                "eval_tasks_per_cell": self.h["tasks_per_cell"], "actor": self.h["actor"],
                "in_flight": self.h["in_flight"], "env_options": self.h["env_options"].get(env) or {},
                "endpoint": self.endpoint(model)}

    def stage_params(self, stage: str, model: str | None = None) -> dict[str, Any]:
        p: dict[str, Any] = {"max_tokens": self.c["review_max_tokens"]}
        if stage == "generate":
            p["generator"] = self.role("generator")
        if stage in ("screen", "compare"):
            p["judge"] = self.role("judge")
        if stage == "compare" and model is not None:
            p["actor"] = {"name": model, **self.endpoint(model), "settings": dict(self.h["actor"])}
        return p

    def recipe(self) -> dict[str, Any]:
        """The SFT recipe (``calibrator.train`` less the rule's plumbing)."""
        return {k: self.train[k] for k in ("base_model", "epochs", "learning_rate", "batch_size", "grad_accum",
                                            "max_length", "bf16", "seed")}

    def source_paths(self) -> list[dict[str, str]]:
        return [{"model": m, "env": e, "episodes": f"results/calibrator/sources/{m}/{e}.parquet",
                 "steps": f"results/calibrator/sources/{m}/{e}.steps.parquet"} for m in self.sources for e in self.envs]

    def source_files(self) -> list[str]:
        return [p[k] for p in self.source_paths() for k in ("episodes", "steps")]

    def compare_files(self) -> list[str]:
        return [f"results/calibrator/compare/{m}.parquet" for m in self.recipients]

    def rollout_files(self) -> dict[str, list[str]]:
        if not self.rollouts_enabled:
            return {}
        ms, es = self.history_models, self.history_envs
        hist = "results/history/rollouts"
        return {"raw": [f"{hist}/{m}/{e}/raw.parquet" for m in ms for e in es],
                "causal": [f"{hist}/{m}/{e}/causal.parquet" for m in ms for e in es],
                "calibrator": [f"results/calibrator/rollouts/{m}/{e}/calibrator.parquet" for m in ms for e in es]}

    def report_inputs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"labels": "results/calibrator/labels.parquet", "compare": self.compare_files(),
                               "datasets": [f"results/calibrator/dataset/{v}.parquet" for v in self.variants],
                               "sft": [f"results/calibrator/sft/{v}/hindsight-sft.json" for v in self.train_variants]}
        out.update(self.rollout_files())
        if self.rollouts_enabled:
            out["joint"] = ["results/calibrator/joint/joint.jsonl", "results/calibrator/joint/action_only.jsonl"]
        return out

    def final_targets(self) -> list[str]:
        if not (self.enabled and self.sources and self.envs):
            return []
        return ["results/calibrator/tables/index.md"]

    @staticmethod
    def alternatives(values: list[str]) -> str:
        return "|".join(v.replace("-", r"\-") for v in values) or "NONE"
