"""What ``workflow/rules/calibrator.smk`` asks of the config: the source, recipient and role
endpoints, the config slice of every job, the checks that fail before any job, the code
inputs and the final targets (:class:`CalibratorWorkflow`, a
:class:`memtrials.pipeline.study.Study`).  Every value comes from the ``calibrator:``
section (and the ``history:`` section it extends) of ``config/config.yaml``; no second
default here."""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.config import ConfigError
from memtrials.envs.catalog import check_split, check_task_count, source_options
from memtrials.pipeline.study import Study, alternatives

PARTS = ("sources", "contexts", "generate", "screen", "compare", "labels", "dataset", "rollouts", "joint",
         "joint_rollouts", "joint_sources", "report", "known")
STAGE_MODULE = {"known": "known", "sources": "entry", "contexts": "contexts", "generate": "generate", "screen": "screen",
                "compare": "compare", "labels": "dataset", "dataset": "dataset", "rollouts": "rollouts", "joint": "joint",
                "joint_rollouts": "jointactor", "joint_sources": "rollouts", "report": "report"}
VARIANTS = ("full", "screen_only")
ARMS = ("joint", "action_only")


class CalibratorWorkflow(Study):
    """The calibrator section of one config (``self.c``; the history section it extends:
    ``self.h``), resolved."""

    name = "calibrator"
    package = "memtrials.studies.history.calibrator"
    parts = PARTS
    code_modules = {part: (STAGE_MODULE[part],) for part in PARTS}
    entry_parts = PARTS
    headline_quantities = ("Calibrator minus Raw: task success, paired by task",
                           "Calibrator minus Causal Transition: task success, paired by task")

    def resolve(self) -> None:
        config = self.config
        self.c = self.section
        self.h = dict(config["history"])
        history_models = list(self.h["models"] or config["panel"])
        self.history_models, self.history_envs = history_models, list(self.h["envs"])
        self.sources = list(self.c["sources"]["models"] or history_models)
        self.envs = list(self.c["sources"]["envs"])
        self.recipients = list(self.c["recipients"] or self.sources)
        self.variants = list(self.c["variants"])
        self.train = dict(self.c["train"])
        self.train_variants = list(self.train["variants"]) if self.train["enabled"] else []
        self.rollouts_enabled = bool(self.c["rollouts"]["enabled"])
        self.rollout_envs = list(self.c["rollouts"]["envs"])
        served = self.serving_trained()
        trained = self.c["rollouts"]["trained"]
        self.trained_cals = (sorted(set(served.values())) if trained is None else list(trained)) \
            if self.rollouts_enabled else []
        ab, jo = dict(self.c["ablation"]), dict(self.c["joint"])
        self.ablation_enabled = self.rollouts_enabled and bool(ab["enabled"])
        self.joint_enabled = self.rollouts_enabled and bool(jo["enabled"])
        self.joint_actors = {arm: list(history_models if eps is None else eps)
                             for arm, eps in dict(jo["actors"]).items()}
        self.joint_train_seeds = [int(k) for k in jo["train"]["seeds"]] if jo["train"]["enabled"] else []
        self.joint_data_models = list(jo["data_models"] or history_models)
        self.roles = dict(config["roles"])
        self.prompts_dir = str(self.c["prompts_dir"])
        self.generator, self.judge = self.roles.get("generator"), self.roles.get("judge")
        self.ablation_endpoints = {v: (e or served.get(v) or self.roles.get("calibrator"))
                                   for v, e in dict(ab["endpoints"]).items()}

    def check(self) -> None:
        for role in ("generator", "judge") + (("calibrator",) if self.rollouts_enabled else ()):
            if role not in self.roles:
                raise ConfigError(f"config key roles.{role}: missing; the calibrator's labels need it "
                                  f"(add `roles: {{{role}: <endpoint>}}` or set calibrator.enabled: false)")
            if self.roles[role] not in self.models_registry:
                raise ConfigError(f"config key roles.{role}: endpoint '{self.roles[role]}' is not in the registry")
        for key, names in (("calibrator.sources.models", self.sources), ("calibrator.recipients", self.recipients)):
            for m in names:
                if m not in self.models_registry:
                    raise ConfigError(f"config key {key}: endpoint '{m}' is not in the registry; add an entry "
                                      f"to {self.config['models_file']} or remove the name")
        for env in self.training_envs():
            if env not in self.c["splits"]:
                raise ConfigError(f"config key calibrator.splits: no entry for environment {env!r}; add "
                                  f"`{env}: <training split>`")
            if env in self.h["splits"] and self.c["splits"][env] == self.h["splits"][env]:
                raise ConfigError(f"config key calibrator.splits.{env}: {self.c['splits'][env]!r} is also the "
                                  f"history evaluation split (history.splits.{env}); the calibrator's tasks must "
                                  "be disjoint from the evaluation tasks: name another split")
            split, n = self.c["splits"][env], self.c["sources"]["tasks_per_cell"]
            check_split(env, split, self.config["envs"], f"calibrator.splits.{env}")
            check_task_count(env, str(split), n, self.config["envs"], "calibrator.sources.tasks_per_cell",
                             f"set calibrator.sources.tasks_per_cell to at most that, or name a larger split in "
                             f"calibrator.splits.{env} (or list more types in history.task_types.{env}, or null)",
                             types=(self.h["task_types"] or {}).get(env), types_key=f"history.task_types.{env}")
        bad = sorted(set(self.variants) - set(VARIANTS)) + sorted(set(self.train["variants"]) - set(self.variants))
        if bad:
            raise ConfigError(f"config key calibrator.variants / calibrator.train.variants: unknown or not built "
                              f"{bad}; allowed: {', '.join(VARIANTS)} (train.variants must be among variants)")
        self.check_rollouts()
        self.check_known()

    def check_known(self) -> None:
        """``calibrator.known_answer``: a planted entry whose params the planted calibrator takes
        (:meth:`~memtrials.pipeline.study.Study.planted_entry`: a registry without it leaves the run out,
        with a warning), and tasks the planted world's train split holds."""
        from memtrials.studies.history.calibrator.planted import PlantedCalibrator

        ka = self.c["known_answer"]
        if ka["enabled"] and self.planted_entry("calibrator.known_answer.endpoint", ka["endpoint"],
                                                PlantedCalibrator.from_params) is not None:
            check_task_count("planted", "train", int(ka["tasks"]), self.config["envs"], "calibrator.known_answer.tasks",
                             "set calibrator.known_answer.tasks to at most that, or raise envs.planted.sizes.train")

    def known_cell(self) -> dict[str, Any]:
        """The known-answer rule's params: its block, the planted params (the truth), the
        endpoint's identity, history's actor settings and the review cap."""
        ka = dict(self.c["known_answer"])
        if not (ka["enabled"] and ka["endpoint"] in self.models_registry):  # off, or left out (check's warning)
            return {}
        ep = self.models_registry[ka["endpoint"]]
        return {"cell": {**ka, "max_tokens": self.c["review_max_tokens"]}, "params": dict(ep.planted.params),
                "endpoint": self.endpoint(ka["endpoint"]), "actor": dict(self.h["actor"])}

    def known_paths(self) -> list[str]:
        ka = self.c["known_answer"]
        if not (self.enabled and ka["enabled"] and ka["endpoint"] in self.models_registry):
            return []
        return [f"results/calibrator/known/tables/known_answer.{ext}" for ext in ("md", "csv", "tex", "html")]

    def training_envs(self) -> list[str]:
        """Environments with rollouts on the calibrator's training splits: the label chain's
        sources, and the joint actor's environments (its SFT data's source rollouts)."""
        joint = [e for e in self.rollout_envs if e not in self.envs] if self.joint_enabled else []
        return self.envs + joint

    def check_rollouts(self) -> None:
        """The rollout keys: environments among history's, every endpoint in the registry (the
        schema fixes the ablation's variants and the joint actor's arms)."""
        c = self.c
        extra = sorted(set(self.rollout_envs) - set(self.history_envs))
        if extra:
            raise ConfigError(f"config key calibrator.rollouts.envs: {extra} not in history.envs "
                              f"{self.history_envs}; the Calibrator rows are compared with history's Raw and Causal "
                              "cells on the same tasks: name environments of history.envs")
        named = [("calibrator.joint.data_models", e) for e in self.joint_data_models]
        named += [(f"calibrator.ablation.endpoints.{v}", e) for v, e in c["ablation"]["endpoints"].items() if e]
        named += [("calibrator.rollouts.trained", e) for e in self.trained_cals]
        named += [(f"calibrator.joint.actors.{a}", e) for a, es in self.joint_actors.items() for e in es]
        for key, e in named:
            if e not in self.models_registry:
                raise ConfigError(f"config key {key}: endpoint '{e}' is not in the registry; add an entry to "
                                  f"{self.config['models_file']} or name another")
        named += [("roles.calibrator", self.roles.get("calibrator"))]
        for key, e in named:
            for man in self.manifests(e):
                variant = man.split("/")[-2]
                if man.startswith("results/calibrator/sft/") and variant not in self.train_variants:
                    raise ConfigError(f"config key {key}: endpoint '{e}' serves the checkpoint {man}, which no rule "
                                      f"of this config trains: set calibrator.train.enabled: true with '{variant}' "
                                      f"in calibrator.train.variants, or name another endpoint")

    def prompt_files(self) -> list[str]:
        from memtrials.studies.history.calibrator.prompts import PROMPT_FILES

        return [f"{self.prompts_dir}/{f}" for f in PROMPT_FILES]

    def in_flight(self) -> int:
        return int(self.h["in_flight"])

    def workload(self) -> list[Any]:
        from memtrials.studies.history.calibrator.workload import workload

        return workload(self)

    def design_figures(self, measured: Mapping[str, Any]) -> dict[str, Any]:
        from memtrials.studies.history.calibrator.workload import design_figures

        return design_figures(self, measured)

    def role(self, name: str) -> dict[str, Any]:
        who = self.roles[name]
        return {"name": who, **self.endpoint(who)}

    def source_cell(self, model: str, env: str) -> dict[str, Any]:
        return {"seed": self.c["seed"], "split": self.c["splits"][env], "sources": dict(self.c["sources"]),
                "eval_split": self.h["splits"][env], "eval_seed": self.h["seed"],
                "eval_tasks_per_cell": self.h["tasks_per_cell"], "actor": self.h["actor"],
                "task_types": (self.h["task_types"] or {}).get(env),
                "in_flight": self.h["in_flight"], "env_options": {**source_options(env, self.config["envs"]), **(self.h["env_options"].get(env) or {})},
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

    def ablation_role(self, variant: str) -> dict[str, Any]:
        who = self.ablation_endpoints[variant]
        return {"name": who, **self.endpoint(who)}

    def training_cell(self, history_cell: Mapping[str, Any], env: str) -> dict[str, Any]:
        """A Calibrator cell on the calibrator's training split of ``env`` (the joint actor's SFT
        data): history's actor settings, the source cells' split, seed and task count, and the
        evaluation task list it must not touch."""
        return {**history_cell, "split": self.c["splits"][env], "seed": self.c["seed"],
                "tasks_per_cell": self.c["sources"]["tasks_per_cell"], "eval_split": self.h["splits"][env],
                "eval_seed": self.h["seed"], "eval_tasks_per_cell": self.h["tasks_per_cell"]}

    def joint_cell(self, history_cell: Mapping[str, Any]) -> dict[str, Any]:
        """A joint-actor cell: history's cell (its tasks, seeds and actor), the reply cap and the
        reply's constraint (``calibrator.joint.reply``, ``max_experience_chars``)."""
        j = self.c["joint"]
        return {**history_cell, "max_output_tokens": j["max_output_tokens"], "reply": j["reply"],
                "max_experience_chars": j["max_experience_chars"]}

    def recipe(self) -> dict[str, Any]:
        """The SFT recipe (``calibrator.train`` less the rule's plumbing; ``base_model`` an
        embedded registry endpoint is resolved to its GGUF by the rule's script)."""
        keys = ("base_model", "label", "epochs", "max_steps", "learning_rate", "batch_size", "grad_accum",
                "max_length", "bf16", "seed", "method", "train_layers", "lora", "gradient_checkpointing",
                "cpu_max_params", "allow_cpu")
        return {k: self.train[k] for k in keys}

    def serving_trained(self) -> dict[str, str]:
        """Variant -> the registry's embedded checkpoint entry that serves what this config's
        ``calibrator_sft`` trains on it (``results/calibrator/sft/<variant>``; the first by name)."""
        out: dict[str, str] = {}
        for name in sorted(self.models_registry):
            ep = self.models_registry[name]
            folder = ep.embedded.checkpoint.rstrip("/") if ep.embedded is not None else ""
            variant = folder.rpartition("/")[2]
            if folder == f"results/calibrator/sft/{variant}" and variant in self.train_variants:
                out.setdefault(variant, name)
        return out

    def sft_code(self) -> list[str]:
        """The training entry point's source files (run in the training environment)."""
        d = "src/memtrials/studies/history/calibrator"
        return [f"{d}/sft.py", f"{d}/sft_model.py", f"{d}/sft_gguf.py", f"{d}/sft_rule.py"]

    def manifests(self, endpoint: str | None) -> list[str]:
        """The training manifest an endpoint serves (an embedded ``checkpoint`` entry's
        ``memtrials-sft.json``), as an input of every rule whose calls go to it: retraining
        reruns them."""
        ep = self.models_registry.get(endpoint) if endpoint else None
        if ep is None or ep.embedded is None or not ep.embedded.checkpoint:
            return []
        from memtrials.config.models import CHECKPOINT_MANIFEST

        return [f"{ep.embedded.checkpoint}/{CHECKPOINT_MANIFEST}"]

    def trained_folders(self) -> dict[str, str]:
        """Every endpoint with a training folder: the served ones of ``calibrator.trained_endpoints``
        and the registry's embedded checkpoint entries."""
        out = dict(self.c["trained_endpoints"])
        for name, ep in self.models_registry.items():
            if ep.embedded is not None and ep.embedded.checkpoint:
                out[name] = ep.embedded.checkpoint
        return out

    def served_checkpoints(self) -> list[str]:
        """The registry's embedded checkpoint entries (their records carry the digest)."""
        return sorted(n for n, ep in self.models_registry.items() if ep.embedded is not None and ep.embedded.checkpoint)

    def trained_file(self, model: str, env: str, who: str) -> str:
        return f"results/calibrator/rollouts/{model}/{env}/calibrator-{who}.parquet"

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
        ms, es = self.history_models, self.rollout_envs
        hist = "results/history/rollouts"
        out = {"raw": [f"{hist}/{m}/{e}/raw.parquet" for m in ms for e in es],
               "causal": [f"{hist}/{m}/{e}/causal.parquet" for m in ms for e in es],
               "calibrator": [f"results/calibrator/rollouts/{m}/{e}/calibrator.parquet" for m in ms for e in es]}
        for who in self.trained_cals:
            out[f"calibrator-{who}"] = [self.trained_file(m, e, who) for m in ms for e in es]
        return out

    def joint_data_files(self) -> dict[str, list[str]]:
        """The rollouts both joint-actor datasets come from, all on the calibrator's training
        splits (``calibrator.splits``, disjoint from ``history.splits``): the Calibrator cells of
        ``calibrator.joint.data_models`` (joint; rule ``calibrator_joint_sources``) and their Raw
        source cells (action-only; rule ``calibrator_sources``), on the same tasks and seeds."""
        ms, es = self.joint_data_models, self.rollout_envs
        return {"calibrator": [f"results/calibrator/joint/sources/{m}/{e}.parquet" for m in ms for e in es],
                "raw": [f"results/calibrator/sources/{m}/{e}.parquet" for m in ms for e in es]}

    def ablation_files(self) -> dict[str, list[str]]:
        """Table 9's Calibrator cells per variant: Table 8's cells of its endpoint where Table 8 has
        them (``roles.calibrator``, ``calibrator.rollouts.trained``: the same tasks, seeds and
        endpoint, so the same rollouts); otherwise the variant's own cells."""
        if not self.ablation_enabled:
            return {}
        out = {}
        for v in VARIANTS:
            who = self.ablation_endpoints[v]
            if who == self.roles.get("calibrator"):
                out[v] = self.rollout_files()["calibrator"]
            elif who in self.trained_cals:
                out[v] = self.rollout_files()[f"calibrator-{who}"]
            else:
                out[v] = [f"results/calibrator/ablation/{v}/{m}/{e}.parquet"
                          for m in self.history_models for e in self.rollout_envs]
        return out

    def joint_files(self) -> dict[str, list[str]]:
        """The joint actor's and the action-only baseline's cells: arm x endpoint x environment."""
        if not self.joint_enabled:
            return {}
        return {a: [f"results/calibrator/joint/rollouts/{a}/{m}/{e}.parquet" for m in self.joint_actors[a]
                    for e in self.rollout_envs] for a in ARMS}

    def joint_sft_files(self) -> list[str]:
        """The joint actor's and the baseline's SFT runs, one per seed (the calibrator's recipe and
        environment, ``calibrator.joint.train``); none unless enabled."""
        if not self.rollouts_enabled:
            return []
        return [f"results/calibrator/sft/{a}-seed{k}/memtrials-sft.json" for a in ARMS for k in self.joint_train_seeds]

    def report_inputs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"labels": "results/calibrator/labels.parquet", "compare": self.compare_files(),
                               "datasets": [f"results/calibrator/dataset/{v}.parquet" for v in self.variants],
                               "sft": [f"results/calibrator/sft/{v}/memtrials-sft.json" for v in self.train_variants]
                               + self.joint_sft_files()}
        out.update(self.rollout_files())
        used = [self.roles.get("calibrator"), *self.trained_cals, *self.ablation_endpoints.values()]
        out["manifests"] = sorted({m for e in used for m in self.manifests(e)})
        if self.rollouts_enabled:
            out["joint"] = ["results/calibrator/joint/joint.jsonl", "results/calibrator/joint/action_only.jsonl"]
        out.update({f"ablation_{v}": fs for v, fs in self.ablation_files().items()})
        out.update({f"arm_{a}": fs for a, fs in self.joint_files().items()})
        return out

    # -- the scorecard (calibrator/headline.py) --------------------------------------------
    def headline_endpoint(self) -> str | None:
        """Whose Calibrator cells the headline reads: the first trained calibrator rolled out, else
        ``roles.calibrator``."""
        return self.trained_cals[0] if self.trained_cals else self.roles.get("calibrator")

    def headline_gap(self, model: str) -> str | None:
        if not self.final_targets():
            return "the calibrator builds nothing under this config (calibrator.sources.envs empty)"
        if not self.rollouts_enabled or not self.rollout_envs:
            return "calibrator.rollouts.enabled is false or calibrator.rollouts.envs is empty: no Calibrator rollouts"
        if model not in self.history_models:
            return f"{model} is not in history.models (null: the panel), the actors of the Calibrator rollouts"
        if not self.headline_endpoint():
            return "roles.calibrator is unset and calibrator.rollouts.trained names none: no calibrator played"
        return None

    def headline_inputs(self, model: str) -> dict[str, list[str]]:
        who, es = str(self.headline_endpoint()), self.rollout_envs
        cal = [f"results/calibrator/rollouts/{model}/{e}/calibrator.parquet" for e in es] \
            if who not in self.trained_cals else [self.trained_file(model, e, who) for e in es]
        hist = "results/history/rollouts"
        return {"raw": [f"{hist}/{model}/{e}/raw.parquet" for e in es],
                "causal": [f"{hist}/{model}/{e}/causal.parquet" for e in es], "calibrator": cal,
                "calibrator_calls": [p.removesuffix(".parquet") + ".calls.parquet" for p in cal],
                "manifests": self.manifests(who)}

    def headline_options(self) -> dict[str, Any]:
        who = str(self.headline_endpoint())
        folders = self.trained_folders()
        return {"calibrator": who, "trained_folders": {who: folders[who]} if who in folders else {},
                "served": self.served_checkpoints(), "n_boot": int(self.h["analysis"]["n_boot"])}

    def record_files(self) -> list[str]:
        """The calls files of every job of the study (history's Raw and Causal cells are history's)."""
        if not self.final_targets():
            return []
        cells = [p for p in self.source_files() if not p.endswith(".steps.parquet")]
        cells += [f"results/calibrator/generate/{self.generator}.parquet",
                  f"results/calibrator/screen/{self.judge}.parquet", *self.compare_files()]
        groups = [{k: v for k, v in self.rollout_files().items() if k.startswith("calibrator")},
                  self.ablation_files(), self.joint_files(), self.joint_data_files() if self.rollouts_enabled else {}]
        cells += [p for g in groups for ps in g.values() for p in ps]
        return sorted({p.removesuffix(".parquet") + ".calls.parquet" for p in cells})

    def final_targets(self) -> list[str]:
        if not (self.enabled and self.sources and self.envs):
            return []
        return ["results/calibrator/tables/index.md"] + self.known_paths()

    alternatives = staticmethod(alternatives)
