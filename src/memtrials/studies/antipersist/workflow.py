"""What ``workflow/rules/antipersist.smk`` asks of the config: jobs, paths, the config slice of
each job (never a key), the source files of each part, and the checks before any job
(:class:`AntipersistWorkflow`, a :class:`memtrials.pipeline.study.Study`).

Every value comes from the ``antipersist:`` section of the config (``config/config.yaml``;
the schema marks every key required): this module holds no second default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from memtrials.config import ConfigError
from memtrials.envs.catalog import check_env_options, check_split, check_task_count, source_options
from memtrials.memory.registry import check_memory, memory_entry, memory_name, source_files
from memtrials.pipeline.study import Study, alternatives, design_gap
from memtrials.studies.antipersist.design import DESIGNS, ENVS, LINEAGE_DESIGNS, sweep_designs, sweep_points
from memtrials.studies.antipersist.memories import uses_selector

ROOT = "results/antipersist"
SELECTOR_KEYS = ("lam", "gamma", "neighbours", "bonus", "min_cosine", "rotate_rounds", "epsilon")
POOL_KEYS = ("train_split", "train_tasks", "eval_split", "eval_tasks")


class AntipersistWorkflow(Study):
    """The antipersist section of one config (``self.a``), resolved."""

    name = "antipersist"
    package = "memtrials.studies.antipersist"
    parts = ("train", "eval", "report", "known_answer")
    code_modules = {"train": ("train",), "eval": ("evaluate",), "report": ("report",),
                    "known_answer": ("known_answer", "known_setting", "train", "evaluate")}
    headline_quantities = ("Anti-Persistence minus Trajectory memory: held-out success, paired by task",)

    def resolve(self) -> None:
        config = self.config
        self.a = self.section
        self.models = list(self.a["models"] or config["panel"])
        self.envs = list(self.a["envs"])
        self.designs = list(self.a["designs"]) + sweep_designs(self.a["sweeps"], self.a["selector"]) \
            if self.enabled else []
        if self.enabled and "antipersist" not in self.designs and any(
                d == "antipersist" for _, _, d in self.sweep_plan()):
            self.designs.append("antipersist")  # the sweep points equal to the main setting are its cells
        self.seeds = list(range(1, int(self.a["seeds"]) + 1)) if self.enabled else []
        self.embedder = config["roles"].get("embedder")

    # -- checks ----------------------------------------------------------------
    def check(self) -> None:
        a, src = self.a, "config key antipersist"
        for env in self.envs:
            if env not in ENVS:
                raise ConfigError(f"{src}.envs: {env!r} is not one of {', '.join(ENVS)}")
            p = a["pools"].get(env)
            if not isinstance(p, Mapping) or sorted(p) != sorted(POOL_KEYS):
                raise ConfigError(f"{src}.pools.{env}: expected a mapping with exactly {', '.join(POOL_KEYS)}; "
                                  f"got {p!r}")
            for key in ("train_tasks", "eval_tasks"):
                v = p[key]
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                    raise ConfigError(f"{src}.pools.{env}.{key}: expected an integer >= 1 or null (all), got {v!r}")
        for d in a["designs"]:
            if memory_name(d) is not None:  # a user's memory as a design (memtrials.memory.registry)
                check_memory(self.config, d, f"{src}.designs", user="the anti-persistence study")
            elif d not in DESIGNS:
                raise ConfigError(f"{src}.designs: unknown design {d!r}; known: {', '.join(DESIGNS)}, "
                                  "memory-<name> (a memory of the config's memory section)")
        if len(set(self.designs)) != len(self.designs):
            raise ConfigError(f"{src}.designs: a design is listed twice ({self.designs})")
        for m in self.models:
            if m not in self.models_registry:
                raise ConfigError(f"{src}.models (or panel): endpoint '{m}' is not in the registry "
                                  f"({self.config['models_file']}); add an entry there or remove the name")
        syn = a["synthesizer"]
        if syn is not None and (syn not in self.models_registry or self.models_registry[syn].task != "chat"):
            raise ConfigError(f"{src}.synthesizer: '{syn}' is not a chat endpoint of the registry; name one, or "
                              "null for the backbone itself (the paper)")
        if self.embedder is None or self.embedder not in self.models_registry \
                or self.models_registry[self.embedder].task != "embed":
            raise ConfigError(f"config key roles.embedder: the antipersist study needs an embedding endpoint (task: "
                              f"embed) there, got {self.embedder!r}; e.g. minilm")
        positive = {"seeds": a["seeds"], "rounds": a["rounds"], "round_size": a["round_size"],
                    "batch_size": a["batch_size"], "in_flight": a["in_flight"], "k": a["k"],
                    "actor.max_actions": a["actor"]["max_actions"],
                    "reflexion.max_reflections": a["reflexion"]["max_reflections"],
                    "expel.max_rules": a["expel"]["max_rules"], "expel.success_chunk": a["expel"]["success_chunk"],
                    "autorefine.prune_every": a["autorefine"]["prune_every"],
                    "selector.neighbours": a["selector"]["neighbours"]}
        for key, v in positive.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{src}.{key}: expected an integer >= 1, got {v!r}")
        if a["round_size"] % a["batch_size"]:
            raise ConfigError(f"{src}.batch_size: {a['batch_size']} does not divide round_size {a['round_size']}; "
                              "a batch (episodes sharing one snapshot) must not straddle two rounds")
        sel = a["selector"]
        if sorted(sel) != sorted(SELECTOR_KEYS):
            raise ConfigError(f"{src}.selector: expected exactly the keys {', '.join(SELECTOR_KEYS)}; "
                              f"got {sorted(sel)}")
        ranges = {"lam": (0.0, 1.0), "gamma": (0.0, 1.0), "epsilon": (0.0, 1.0), "min_cosine": (-1.0, 1.0),
                  "bonus": (0.0, float("inf"))}
        for key, (lo, hi) in ranges.items():
            v = sel[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= float(v) <= hi or \
                    (key == "gamma" and float(v) == 0.0):
                raise ConfigError(f"{src}.selector.{key}: expected a number in [{lo}, {hi}]"
                                  f"{' (not 0)' if key == 'gamma' else ''}, got {v!r}")
        rot = sel["rotate_rounds"]
        if isinstance(rot, bool) or not isinstance(rot, int) or rot < 0:
            raise ConfigError(f"{src}.selector.rotate_rounds: expected an integer >= 0, got {sel['rotate_rounds']!r}")
        if not 0.0 <= float(a["autorefine"]["prune_fraction"]) < 1.0:
            raise ConfigError(f"{src}.autorefine.prune_fraction: expected a fraction in [0, 1), got "
                              f"{a['autorefine']['prune_fraction']!r}")
        for key in ("gamma", "lambda"):
            vals = a["sweeps"][key]
            if not isinstance(vals, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                     and 0.0 <= float(v) <= 1.0 for v in vals):
                raise ConfigError(f"{src}.sweeps.{key}: expected a list of numbers in [0, 1], got {vals!r}")
        if float(0) in [float(v) for v in a["sweeps"]["gamma"]] and a["sweeps"]["enabled"]:
            raise ConfigError(f"{src}.sweeps.gamma: 0 is not a decay (every older outcome would weigh nothing)")
        for key in ("memory_prompts_dir", "actor_prompts_dir"):
            if not Path(str(a[key])).is_dir():
                raise ConfigError(f"{src}.{key}: folder '{a[key]}' does not exist; restore it from git or fix the key")
        self.check_pools()
        if a["known_answer"]["enabled"]:
            self.known_answer_endpoints(a["known_answer"])

    def check_pools(self, tasks_dir: str = "results/tasks") -> None:
        """Each pool's splits exist in its environment's task table and hold the tasks asked
        for, and ``antipersist.env_options`` names options ``make_env`` takes (before any job:
        :mod:`memtrials.envs.catalog`)."""
        a, envs_cfg = self.a, self.config["envs"]
        check_env_options(a["env_options"], "antipersist.env_options", ENVS)
        for env in self.envs:
            pool = a["pools"][env]
            for role in ("train", "eval"):
                split_key, count_key = f"antipersist.pools.{env}.{role}_split", f"antipersist.pools.{env}.{role}_tasks"
                check_split(env, pool[f"{role}_split"], envs_cfg, split_key)
                check_task_count(env, str(pool[f"{role}_split"]), pool[f"{role}_tasks"], envs_cfg, count_key,
                                 f"set {count_key} to at most that (or null: the whole split), or name a larger "
                                 f"split in {split_key}", tasks_dir)

    # -- paths -----------------------------------------------------------------
    def jobs(self) -> list[tuple[str, str, str, int]]:
        """(model, env, design, seed) of every training stream (and its evaluation)."""
        return [(m, e, d, s) for m in self.models for e in self.envs for d in self.designs for s in self.seeds]

    @staticmethod
    def base(model: str, env: str, design: str, seed: int | str) -> str:
        return f"{ROOT}/{model}/{env}/{design}/seed{seed}"

    def report_inputs(self) -> dict[str, list[str]]:
        """Every job's episode tables, and the final snapshots of the designs whose stored
        abstractions carry a lineage (the error-reproduction table reads them)."""
        jobs = self.jobs()
        return {"eval": [f"{self.base(*j)}/eval.parquet" for j in jobs],
                "train": [f"{self.base(*j)}/train.parquet" for j in jobs],
                "memory": [f"{self.base(*j)}/memory.json" for j in jobs if j[2] in LINEAGE_DESIGNS]}

    # -- the scorecard (studies/antipersist/headline.py) -----------------------------------
    def headline_gap(self, model: str) -> str | None:
        return design_gap(model, self.models, self.envs, ("antipersist", "trajectory"), self.designs,
                          section=self.name, arms_key="antipersist.designs")

    def headline_inputs(self, model: str) -> dict[str, list[str]]:
        return {d: [f"{self.base(model, e, d, s)}/eval.parquet" for e in self.envs for s in self.seeds]
                for d in ("antipersist", "trajectory")}

    def headline_options(self) -> dict[str, Any]:
        return {"n_boot": int(self.config["scorecard"]["n_boot"])}

    def record_files(self) -> list[str]:
        return [f"{self.base(*j)}/{part}.calls.parquet" for j in self.jobs() for part in ("train", "eval")]

    def sweep_plan(self) -> list[list[Any]]:
        """``[key, value, design]`` of every sweep point (the report's rows; :func:`.design.sweep_points`)."""
        return [[k, v, d] for k, v, d in sweep_points(self.a["sweeps"], self.a["selector"])]

    def workload(self) -> list[Any]:
        """Per (model, env, design, seed): a training job (``rounds`` x ``round_size`` episodes)
        and an evaluation job (the held-out pool, once per evaluated snapshot), each episode up
        to ``actor.max_actions`` actor calls; a design's memory calls (synthesis, retrieval,
        indexing: they differ by design) are counted per episode from the measured table
        (:data:`memtrials.pipeline.workload.ANY`) under the part ``<train|eval>/<design>``, or,
        where the design's memory declares its calls (:func:`.memories.declared_calls`: ReAct none,
        ExpeL, AutoRefine), one row per declared purpose (figures: :meth:`design_figures` where
        the table lacks them)."""
        from memtrials.pipeline.workload import ANY, Work, tasks_of
        from memtrials.studies.antipersist.memories import declared_calls

        if not self.enabled:
            return []
        a, out = self.a, []
        steps, flight = int(a["actor"]["max_actions"]), int(a["in_flight"])
        for m, env, design, seed in self.jobs():
            pool = a["pools"][env]
            n_eval = tasks_of(env, str(pool["eval_split"]), pool["eval_tasks"], self.config["envs"])
            n_train = int(a["rounds"]) * int(a["round_size"])
            n_eval = int(n_eval) * (int(a["rounds"]) if a["eval_every_round"] else 1)
            syn = a["synthesizer"] or m
            for phase, n in (("train", n_train), ("eval", n_eval)):
                part, cell = f"{phase}/{self.measured_design(design)}", f"antipersist/{m}/{env}/{design}/seed{seed}/{phase}"
                out.append(Work(part, m, "actor", units=n, steps=steps, jobs=1, episodes=n, in_flight=flight, cell=cell))
                calls = declared_calls(design, phase)
                if calls is None:
                    out.append(Work(part, syn, ANY, units=n, embedder=str(self.embedder), cell=cell))
                for purpose, task in sorted((calls or {}).items()):
                    out.append(Work(part, str(self.embedder) if task == "embed" else syn, purpose, units=n, cell=cell))
        return out

    def design_figures(self, measured: Mapping[str, Any]) -> dict[str, Any]:
        from memtrials.studies.antipersist.figures import design_figures

        return design_figures(self, measured)

    @staticmethod
    def measured_design(design: str) -> str:
        """The design whose measured figures stand for ``design`` (a sweep point: the bandit's)."""
        return "antipersist" if design.startswith(("antipersist-gamma-", "antipersist-lambda-")) else design

    def profile_key(self, cell_id: str, purpose: str) -> tuple[str, str]:
        """``antipersist/<model>/<env>/<design>/seed<i>/<train|eval>[/r<round>]`` -> ``<train|eval>/<design>``."""
        parts = cell_id.split("/")
        return f"{parts[5]}/{self.measured_design(parts[3])}", purpose

    def final_targets(self) -> list[str]:
        if not (self.enabled and self.jobs()):
            return []
        return [f"{ROOT}/tables/index.md"]

    # -- job slices ------------------------------------------------------------
    def cell(self, model: str, env: str, design: str) -> dict[str, Any]:
        """Everything of the config that determines one job's output (train and eval alike; a
        user memory's design also its config entry, :func:`memtrials.memory.registry.memory_entry`)."""
        a = self.a
        syn = a["synthesizer"] or model
        cell: dict[str, Any] = {
            "seed": a["seed"], "rounds": a["rounds"], "round_size": a["round_size"], "batch_size": a["batch_size"],
            "in_flight": a["in_flight"], "k": a["k"], "pools": {env: dict(a["pools"][env])},
            "env_options": {env: {**source_options(env, self.config["envs"]), **(a["env_options"].get(env) or {})}}, "actor": dict(a["actor"]),
            "synthesis": dict(a["synthesis"]), "synthesizer": a["synthesizer"], "embedder": self.embedder,
            "endpoint": self.endpoint(model), "synthesizer_endpoint": self.endpoint(syn),
            "embedder_endpoint": self.endpoint(self.embedder),
        }
        for key in ("reflexion", "expel", "autorefine"):
            if design == key:
                cell[key] = dict(a[key])
        if uses_selector(design):
            cell["selector"] = dict(a["selector"])
        name = memory_name(design)
        if name is not None:
            cell["memory"] = memory_entry(self.config, name)
        return cell

    def known_answer(self) -> dict[str, Any] | None:
        """The known-answer run's slice (:mod:`.known_answer`): the derived section and its endpoints;
        ``None`` when ``antipersist.known_answer.enabled`` is false (or the study is off)."""
        from memtrials.studies.antipersist.known_setting import known_config

        if not (self.enabled and self.a["known_answer"]["enabled"]) or \
                not all(self.a["known_answer"][k] in self.models_registry for k in ("model", "embedder")):
            return None
        ka = self.a["known_answer"]
        return {"antipersist": known_config(self.config)["antipersist"],
                "endpoints": {n: self.endpoint(n) for n in (ka["model"], ka["embedder"])}}

    def memory_code(self, design: str) -> list[str]:
        """The module file of a user memory's design (the train and eval rules' ``code`` input too)."""
        return source_files(self.config, design)

    def prompt_files(self) -> list[str]:
        """The prompt files of the study's memory designs and baselines (each design loads its own),
        in the memories' folder (``antipersist.memory_prompts_dir``); the study has none of its own."""
        from memtrials.memory import abstraction, antipersist, autorefine, expel, reflexion

        names = (*abstraction.PROMPT_FILES, *antipersist.PROMPT_FILES, *reflexion.PROMPT_FILES,
                 *expel.PROMPT_FILES, *autorefine.PROMPT_FILES)
        return [f"{self.a['memory_prompts_dir']}/{f}" for f in names]

    def actor_prompt_files(self) -> list[str]:
        from memtrials.agent.prompts import PROMPT_FILES

        return [f"{self.a['actor_prompts_dir']}/{f}" for f in PROMPT_FILES]

    def in_flight(self) -> int:
        return int(self.a["in_flight"])

    def alternatives(self, kind: str) -> str:
        values = {"env": self.envs, "design": self.designs, "seed": [str(s) for s in self.seeds]}[kind]
        return alternatives(values, escape="-.")
