"""What ``workflow/rules/playbook.smk`` asks of the config: settings, paths, the config slice
of each job (never a key), the source files of each part, and the checks before any job
(:class:`PlaybookWorkflow`, a :class:`memtrials.pipeline.study.Study`).

Every value comes from the ``playbook:`` section of the config (``config/config.yaml``;
the schema marks every key required): this module holds no second default.
"""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.config import ConfigError
from memtrials.envs.catalog import check_env_options, check_split, check_task_count, source_options
from memtrials.envs.catalog import source as data_source
from memtrials.memory.registry import PLAYBOOK, check_memory, memory_entry, memory_name, source_files
from memtrials.pipeline.study import Study, alternatives
from memtrials.studies.playbook.scoreplan import EstimatePlan, ScorecardPlan
from memtrials.envs.tasks import ENV_NAMES
from memtrials.studies.playbook.design import ACTOR_KEYS, GROWTHS, ROLES, TOKENIZERS, VARIANTS, variants_for

PARTS = ("growth", "practice", "choice", "eval", "report", "baseline", "pooled", "diagnostics", "known_answer")
ENVS = ("alfworld", "appworld", "webshop", "planted")  # planted: the known-answer run (or any setting)
ROOT = "results/playbook"


class PlaybookWorkflow(ScorecardPlan, EstimatePlan, Study):
    """The playbook section of one config (``self.p``), resolved."""

    name = "playbook"
    package = "memtrials.studies.playbook"
    parts = PARTS
    code_modules = {"growth": ("growth",), "practice": ("practice",), "choice": ("choice",), "eval": ("evaluate",),
                    "report": ("report",), "baseline": ("baseline_eval",), "pooled": ("baseline_eval",),
                    "diagnostics": ("diagnostics",),
                    "known_answer": ("known_answer", "known_setting", "growth", "practice", "choice", "evaluate")}

    def resolve(self) -> None:
        config = self.config
        self.p = self.section
        self.models = list(self.p["models"] or config["panel"])
        self.envs = list(self.p["envs"])
        self.growths = ["std", "long"] if self.p["long_growth"] else ["std"]
        self.runs = int(self.p["growth"]["runs"])
        self.roles = dict(config["roles"])
        self.user_variants = [s for s in self.p["systems"] if memory_name(s) is not None]  # memory-<name>
        self.variant_names = list(VARIANTS) + self.user_variants

    # -- checks ----------------------------------------------------------------
    def check(self) -> None:
        p, src = self.p, "config key playbook"
        for env in self.envs:
            if env not in ENVS:
                raise ConfigError(f"{src}.envs: {env!r} is not one of {', '.join(ENVS)}")
            source = data_source(env, self.config["envs"])
            roles = (p["splits"].get(env) or {}).get(source)
            if not isinstance(roles, Mapping) or set(roles) != set(ROLES):
                raise ConfigError(f"{src}.splits.{env}.{source}: expected a mapping of {', '.join(ROLES)} to task-table "
                                  f"splits (the data source of {env} is {source!r}); add it")
        for pair in p["exclude"]:
            parts = str(pair).removeprefix("long:").split(":")
            if len(parts) not in (2, 3) or not parts[0] or parts[1] not in ENVS or \
                    (len(parts) == 3 and parts[2] not in self.variant_names):
                raise ConfigError(f"{src}.exclude: {pair!r} is not '<model>:<env>' or '<model>:<env>:<variant>' "
                                  f"(model a name or *, env one of {', '.join(ENVS)}, variant one of "
                                  f"{', '.join(self.variant_names)}; prefixed 'long:' for long growth only)")
        for s in p["systems"]:
            if memory_name(s) is not None:  # a user's memory as a growth system (memtrials.memory.registry)
                check_memory(self.config, s, f"{src}.systems", needs=PLAYBOOK, user="the playbook study")
            elif s not in ("ace", "dc"):
                raise ConfigError(f"{src}.systems: {s!r} is not one of ace, dc, memory-<name> (a memory of the "
                                  "config's memory section)")
        for f in p["appworld_feedback"]:
            if f not in ("pass_fail", "unit_tests"):
                raise ConfigError(f"{src}.appworld_feedback: {f!r} is not one of pass_fail, unit_tests")
        for m in self.models:
            if m not in self.models_registry:
                raise ConfigError(f"{src}.models (or panel): endpoint '{m}' is not in the registry "
                                  f"({self.config['models_file']}); add an entry there or remove the name")
        for role in ("reflector", "curator", "embedder"):
            name = self.roles.get(role)
            if name is None:
                raise ConfigError(f"config key roles.{role}: the playbook study needs it; add `roles: {{{role}: "
                                  "<endpoint>}}` (default in config/config.yaml)")
            if name not in self.models_registry:
                raise ConfigError(f"config key roles.{role}: endpoint '{name}' is not in the registry")
        if self.models_registry[self.roles["embedder"]].task != "embed":
            raise ConfigError(f"config key roles.embedder: endpoint '{self.roles['embedder']}' is not an embedding "
                              "endpoint (task: embed); name one, e.g. minilm")
        if p["tokenizer"] not in TOKENIZERS:
            raise ConfigError(f"{src}.tokenizer: {p['tokenizer']!r} is not one of {', '.join(TOKENIZERS)}")
        g, meas = p["growth"], p["measurement"]
        positive = {"growth.runs": g["runs"], "growth.train_tasks": g["train_tasks"],
                    "growth.batch_size": g["batch_size"], "growth.max_passes": g["max_passes"],
                    "growth.long_passes": g["long_passes"], "measurement.blocks": meas["blocks"],
                    "measurement.episodes": meas["episodes"], "choice.episodes": p["choice"]["episodes"],
                    "evaluation.seeds": p["evaluation"]["seeds"],
                    "in_flight": p["in_flight"], "actor.max_actions": p["actor"]["max_actions"]}
        for key, v in positive.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{src}.{key}: expected an integer >= 1, got {v!r}")
        for env, over in (p["actor_env"] or {}).items():
            bad = sorted(set(over or {}) - set(ACTOR_KEYS))
            if env not in ENV_NAMES or bad:
                raise ConfigError(f"{src}.actor_env.{env}: " + (f"unknown key(s) {bad}; allowed: {', '.join(ACTOR_KEYS)}"
                                  if bad else f"unknown environment; expected one of {', '.join(ENV_NAMES)}"))
            v = (over or {}).get("max_actions", 1)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{src}.actor_env.{env}.max_actions: expected an integer >= 1, got {v!r}")
        v = p["evaluation"]["tasks"]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"{src}.evaluation.tasks: expected an integer >= 1 or null (the whole split), got {v!r}")
        if not isinstance(meas["practice_tasks"], int) or meas["practice_tasks"] < 2:
            raise ConfigError(f"{src}.measurement.practice_tasks: the estimate leaves one task out, so it needs "
                              f"at least 2 practice tasks, got {meas['practice_tasks']!r}")
        if not 0 < float(meas["budget"]) <= 1:
            raise ConfigError(f"{src}.measurement.budget: a fraction of the whole playbook's tokens in (0, 1], "
                              f"got {meas['budget']!r}")
        if not 0 < float(meas["p"]) < 1:
            raise ConfigError(f"{src}.measurement.p: an inclusion probability in (0, 1), got {meas['p']!r}")
        self.check_tasks()
        self.check_baselines()
        if p["known_answer"]["enabled"]:
            self.known_answer_endpoints(p["known_answer"])

    def check_tasks(self, tasks_dir: str = "results/tasks") -> None:
        """Each role's split exists in its environment's task table and holds the tasks the
        role asks for, and ``playbook.env_options`` names options ``make_env`` takes (before
        any job: :mod:`memtrials.envs.catalog`)."""
        p, envs_cfg = self.p, self.config["envs"]
        check_env_options(p["env_options"], "playbook.env_options", ENVS)
        wants = {"train": "growth.train_tasks", "practice": "measurement.practice_tasks", "eval": "evaluation.tasks"}
        for env in self.envs:
            source = data_source(env, envs_cfg)
            for role, key in wants.items():
                split_key = f"playbook.splits.{env}.{source}.{role}"
                split = p["splits"][env][source][role]
                check_split(env, split, envs_cfg, split_key)
                section, _, name = key.partition(".")
                check_task_count(env, str(split), p[section][name], envs_cfg, f"playbook.{key}",
                                 f"set playbook.{key} to at most that, or name a larger split in {split_key}",
                                 tasks_dir)

    def check_baselines(self) -> None:
        """``playbook.baselines`` (issue 10): known methods and benchmarks, sizes that make sense."""
        from memtrials.studies.playbook.methods import METHODS

        b, src = self.p["baselines"], "config key playbook.baselines"
        for m in b["methods"]:
            if m not in METHODS:
                raise ConfigError(f"{src}.methods: {m!r} is not one of {', '.join(METHODS)}")
        for e in b["envs"] or []:
            if e not in ENVS:
                raise ConfigError(f"{src}.envs: {e!r} is not one of {', '.join(ENVS)}")
        sizes = {"top_k": b["top_k"], "dc_attempts": b["dc_attempts"], "pooled_episodes": b["pooled_episodes"]}
        sizes.update({f"k_values[{i}]": k for i, k in enumerate(b["k_values"])})
        if b["runs"] is not None:
            sizes["runs"] = b["runs"]
        for key, v in sizes.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{src}.{key}: expected an integer >= 1, got {v!r}")
        for pair in b["subsampled_settings"] or []:
            e, _, v = str(pair).partition(":")
            if e not in ENVS or v not in self.variant_names:
                raise ConfigError(f"{src}.subsampled_settings: {pair!r} is not '<env>:<variant>' with env one of "
                                  f"{', '.join(ENVS)} and variant one of {', '.join(self.variant_names)}")
        if not b["k_values"]:
            raise ConfigError(f"{src}.k_values: Top-k* chooses among these; give at least one k")
        if not 0 < float(b["cut_share"]) <= 1:
            raise ConfigError(f"{src}.cut_share: a share of Best-Full's tokens in (0, 1], got {b['cut_share']!r}")
        if not 0 < float(b["merge_threshold"]) <= 1:
            raise ConfigError(f"{src}.merge_threshold: a cosine in (0, 1], got {b['merge_threshold']!r}")
        for name in b["other_judges"] if "judge_other" in b["methods"] else ():
            if name not in self.models_registry:
                raise ConfigError(f"{src}.other_judges: endpoint {name!r} is not in the registry "
                                  f"({self.config['models_file']}); add an entry there or remove the name")
        k = self.p["choice"]["runs"]
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.runs):
            raise ConfigError(f"config key playbook.choice.runs: expected null or an integer in 1..growth.runs "
                              f"({self.runs}), got {k!r}")
        h = self.p["diagnostics"]["halvings"]
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise ConfigError(f"config key playbook.diagnostics.halvings: expected an integer >= 1, got {h!r}")

    # -- settings and paths ----------------------------------------------------
    def variants(self, env: str) -> list[str]:
        """ACE's and DC's variants on ``env`` (:func:`.design.variants_for`), then each user memory
        listed in ``playbook.systems`` (``memory-<name>``, its own variant), in the listed order."""
        return variants_for(env, self.p["systems"], self.p["appworld_feedback"]) + self.user_variants

    def settings(self) -> list[tuple[str, str, str, str]]:
        """(growth, model, env, variant) of every setting, less ``playbook.exclude``'s entries:
        ``<model>:<env>`` (every variant) or ``<model>:<env>:<variant>``, ``*`` for any model;
        prefixed ``long:``, the long-growth setting only (Table 2 leaves WebShop out for 9B and Gemma).
        Long growth only on ACE's variants: the paper grows long on ACE, which never removes a
        lesson; Dynamic Cheatsheet rewrites its playbook, so it does not keep growing."""
        skip = {str(x) for x in self.p["exclude"]}

        def left_out(g: str, m: str, e: str, v: str) -> bool:
            keys = {f"{m}:{e}", f"*:{e}", f"{m}:{e}:{v}", f"*:{e}:{v}"}
            return bool((keys | {f"{g}:{k}" for k in keys if g == "long"}) & skip)

        return [(g, m, e, v) for g in self.growths for m in self.models for e in self.envs for v in self.variants(e)
                if not left_out(g, m, e, v) and (g == "std" or v.startswith("ace"))]  # long growth: ACE (Appendix E)

    def role(self, role: str, model: str) -> str:
        """The endpoint of ``role`` (reflector, curator) in ``model``'s settings: ``model`` itself
        when ``playbook.roles_from_model`` (the paper: each model plays every role), else ``roles.<role>``."""
        return model if self.p["roles_from_model"] and role in ("reflector", "curator") else self.roles[role]

    @staticmethod
    def base(growth: str, model: str, env: str, variant: str) -> str:
        return f"{ROOT}/{growth}/{model}/{env}/{variant}"

    def runs_of(self, growth: str) -> int:
        """Growth runs of a recipe: ``growth.runs`` for std (Figure 6's 1..K); long growth grows
        Table 1's K new runs (Appendix E: "each setting gets three new growth runs")."""
        return self.runs if growth == "std" else self.headline_runs()

    def candidates(self, growth: str = "std") -> list[str]:
        """Candidate names in path form, RBC's order: curated per run, whole per run, none."""
        runs = range(1, self.runs_of(growth) + 1)
        return [f"curated-run{k}" for k in runs] + [f"whole-run{k}" for k in runs] + ["none"]

    def run_paths(self, wc: Any, kind: str) -> list[str]:
        b = self.base(wc.growth, wc.model, wc.env, wc.variant)
        suffix = {"playbooks": "growth/run{k}.playbooks.parquet", "growth": "growth/run{k}.json",
                  "practice": "practice/run{k}.json"}[kind]
        return [f"{b}/{suffix.format(k=k)}" for k in range(1, self.runs_of(wc.growth) + 1)]

    def report_inputs(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"growth": [], "playbooks": [], "practice": [], "choice": [], "eval": [],
                                     "calls": []}
        for g, m, e, v in self.settings():
            b = self.base(g, m, e, v)
            for k in range(1, self.runs_of(g) + 1):
                out["growth"].append(f"{b}/growth/run{k}.json")
                out["playbooks"].append(f"{b}/growth/run{k}.playbooks.parquet")
                out["practice"].append(f"{b}/practice/run{k}.json")
                out["calls"] += [f"{b}/growth/run{k}.calls.parquet", f"{b}/practice/run{k}.calls.parquet"]
            out["choice"].append(f"{b}/choice.json")
            out["calls"].append(f"{b}/choice.calls.parquet")
            out["eval"] += [f"{b}/eval/{c}.parquet" for c in self.candidates(g)]
            out["calls"] += [f"{b}/eval/{c}.calls.parquet" for c in self.candidates(g)]
        out["baselines"] = self.baseline_paths("record")
        return out

    def baseline_methods(self, env: str, variant: str) -> list[str]:
        """The baselines evaluated on a setting: ``playbook.baselines.methods`` on its
        ``envs`` (null: every benchmark); Tags* only where lessons carry tags (ACE), Pooled only
        with K >= 2.  Only the std-growth settings get them (:meth:`baseline_paths`; Table 1 is on std growth)."""
        b = self.p["baselines"]
        if b["envs"] is not None and env not in b["envs"]:
            return []
        skip = {"tags_star"} if not variant.startswith("ace") else set()
        if b["subsampled_settings"] is not None and f"{env}:{variant}" not in b["subsampled_settings"]:
            skip.add("subsampled")  # Table 17's evaluated values only where asked (each adds 4 sets' evaluation)
        if self.runs < 2:
            skip.add("pooled")  # pooling needs two runs (inclusion 1/K < 1)
        return [m for m in b["methods"] if m not in skip]

    def baseline_paths(self, kind: str = "record") -> list[str]:
        suffix = {"record": ".json", "episodes": ".parquet", "calls": ".calls.parquet"}[kind]
        return [f"{self.base(g, m, e, v)}/baseline/{x}{suffix}" for g, m, e, v in self.settings() if g == "std"
                for x in self.baseline_methods(e, v)]

    def pooled_input(self, wc: Any) -> list[str]:
        """The pooled practice round's record, for the ``pooled`` baseline only."""
        if wc.method != "pooled":
            return []
        return [f"{self.base(wc.growth, wc.model, wc.env, wc.variant)}/pooled/practice.json"]

    def diagnostics_inputs(self) -> dict[str, list[str]]:
        """What the diagnostics read: playbooks, practice rounds, choices and evaluations (std growth),
        and the ``subsampled`` baseline's episodes where it ran (Table 17's evaluated values)."""
        rep = self.report_inputs()
        keep = {k: [p for p in rep[k] if p.startswith(f"{ROOT}/std/")] for k in ("playbooks", "practice", "choice",
                                                                               "eval")}
        keep["subsampled"] = [p for p in self.baseline_paths("episodes") if p.endswith("/baseline/subsampled.parquet")]
        return keep

    def final_targets(self) -> list[str]:
        if not (self.enabled and self.settings()):
            return []
        out = [f"{ROOT}/tables/index.md"]
        if self.p["diagnostics"]["enabled"]:
            out.append(f"{ROOT}/diagnostics/index.md")
        return out

    # -- job slices ------------------------------------------------------------
    def splits(self, env: str) -> dict[str, str]:
        return {r: str(self.p["splits"][env][data_source(env, self.config["envs"])][r]) for r in ROLES}

    def cell(self, part: str, model: str, env: str, variant: str | None = None) -> dict[str, Any]:
        """Everything of the config that determines one job's output (a growth run of a user
        memory's ``variant`` also its config entry, :func:`memtrials.memory.registry.memory_entry`)."""
        if part not in PARTS or part in ("report", "diagnostics"):
            raise ValueError(f"playbook: unknown part {part!r}")
        p = self.p
        cell: dict[str, Any] = {
            "seed": p["seed"], "splits": self.splits(env), "env_options": {**source_options(env, self.config["envs"]), **(p["env_options"].get(env) or {})},
            "in_flight": p["in_flight"], "actor": {**p["actor"], **(p["actor_env"].get(env) or {})},
            "endpoint": self.endpoint(model),
            "measurement": {"practice_tasks": p["measurement"]["practice_tasks"]},
        }
        if part == "growth":
            roles = {r: self.role(r, model) for r in ("reflector", "curator", "embedder")}
            cell.update(growth=dict(p["growth"]), tokenizer=p["tokenizer"], roles=roles,
                        role_endpoints={r: self.endpoint(n) for r, n in roles.items()})
            name = memory_name(variant or "")
            if name is not None:
                cell["memory"] = memory_entry(self.config, name)
        if part == "practice":
            cell.update(measurement=dict(p["measurement"]), roles={"embedder": self.roles["embedder"]},
                        role_endpoints={"embedder": self.endpoint(self.roles["embedder"])})
        if part in ("practice", "choice", "eval", "baseline", "pooled"):
            cell["grouped"] = bool(p["growth"]["grouped"])  # one rendering of a lesson set (play.view_of)
        if part in ("choice", "baseline", "pooled"):
            cell["choice"], cell["cut_runs"] = dict(p["choice"]), self.cut_runs()
        if part == "eval":
            cell["evaluation"] = dict(p["evaluation"])
        if part in ("baseline", "pooled"):
            b = {k: v for k, v in p["baselines"].items() if k not in ("methods", "envs", "prompts_dir",
                                                                      "subsampled_settings", "other_judges")}
            roles = {"embedder": self.roles["embedder"], "curator": self.role("curator", model), "judge": model}
            if "judge_other" in p["baselines"]["methods"]:
                roles["judge_other"] = self.other_judge(model)
            cell.update(measurement=dict(p["measurement"]), baselines=b, roles=roles,
                        role_endpoints={r: self.endpoint(n) for r, n in roles.items()})
            if part == "baseline":
                cell["evaluation"] = dict(p["evaluation"])
        return cell

    def known_answer(self) -> dict[str, Any] | None:
        """The known-answer run's slice (:mod:`.known_answer`): the derived setting's playbook section and
        its endpoints; ``None`` when ``playbook.known_answer.enabled`` is false (or the study is off)."""
        from memtrials.studies.playbook.known_setting import known_config

        if not (self.enabled and self.p["known_answer"]["enabled"]) or \
                not all(self.p["known_answer"][k] in self.models_registry for k in ("model", "embedder")):
            return None
        cfg = known_config(self.config)
        ka = self.p["known_answer"]
        return {"playbook": cfg["playbook"], "endpoints": {n: self.endpoint(n) for n in (ka["model"], ka["embedder"])}}

    def headline_runs(self) -> int:
        """K of RBC and Best-Full in Table 1: ``choice.runs`` (null: every grown run)."""
        k = self.p["choice"]["runs"]
        return self.runs if k is None else int(k)

    def cut_runs(self) -> list[str]:
        """The runs every same-budget method (RBC-cut and each budgeted baseline) and Table 1's
        Whole are computed on and averaged over: the first ``baselines.runs`` of the headline K
        (null: all of them), so each compared cell stands on the same runs (issue 36)."""
        n, k = self.p["baselines"]["runs"], self.headline_runs()
        return [f"run{j}" for j in range(1, (k if n is None else min(int(n), k)) + 1)]

    def other_judge(self, model: str) -> str:
        """The judge of ``judge_other``: the first of ``baselines.other_judges`` that is not ``model``."""
        for name in self.p["baselines"]["other_judges"]:
            if name != model:
                return str(name)
        raise ConfigError(f"config key playbook.baselines.other_judges: every entry is {model!r}, the setting's own "
                          "model; name another endpoint of the registry")

    def prompt_files(self) -> list[str]:
        from memtrials.memory.ace import PROMPT_FILES as ACE
        from memtrials.memory.cheatsheet import PROMPT_FILES as DC

        return [f"{self.p['memory_prompts_dir']}/{f}" for f in (*ACE, *DC)]

    def baseline_prompt_files(self) -> list[str]:
        from memtrials.studies.playbook.methods import DC_PROMPT_FILES, JUDGE_PROMPT_FILES

        return [f"{self.p['baselines']['prompts_dir']}/{f}" for f in (*DC_PROMPT_FILES, *JUDGE_PROMPT_FILES)]

    def actor_prompt_files(self) -> list[str]:
        from memtrials.agent.prompts import PROMPT_FILES

        return [f"{self.p['actor_prompts_dir']}/{f}" for f in PROMPT_FILES]

    def in_flight(self) -> int:
        return int(self.p["in_flight"])

    def memory_code(self, variant: str) -> list[str]:
        """The module file of a user memory's variant (the growth rule's ``code`` input too)."""
        return source_files(self.config, variant)

    def alternatives(self, kind: str) -> str:
        from memtrials.studies.playbook.methods import METHODS

        values = {"growth": list(GROWTHS), "variant": self.variant_names, "env": self.envs,
                  "candidate": self.candidates(), "method": list(METHODS)}[kind]
        return alternatives(values)
