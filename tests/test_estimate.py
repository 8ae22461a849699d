"""``python -m memtrials estimate``: the price model, prefix chains, the measured table, the
sums, and (slow) the estimate of a loopback run against the calls and tokens it recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from memtrials.__main__ import main
from memtrials.config.models import Price
from memtrials.pipeline import estimate as est
from memtrials.pipeline.workload import ANY, Profile, Tally, Work

REPO = Path(__file__).resolve().parents[1]


def test_price_prices_cached_input_only_where_the_registry_gives_a_price():
    assert Price(1.0, 4.0).cost(1_000_000, 500_000, cached_tokens=800_000) == pytest.approx(3.0)
    cached = Price(1.0, 4.0, cached_input_per_mtok=0.1)
    assert cached.cost(1_000_000, 500_000, cached_tokens=800_000) == pytest.approx(0.2 + 0.08 + 2.0)
    assert cached.cost(100, 0, cached_tokens=1_000) == pytest.approx(100 * 0.1 / 1e6)  # at most the prompt


def test_common_prefix_and_prompt_text():
    assert est.common_prefix("abcdef", "abcxyz") == 3 and est.common_prefix("", "a") == 0
    assert est.common_prefix("same", "same") == 4
    msgs = json.dumps([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert est.prompt_text(msgs) == "<system>S<user>U"


def _record(cell, i, text, prompt, completion=3, purpose="actor", endpoint="m"):
    return {"cell_id": cell, "call_id": f"{cell}-{i:03d}", "started_at": f"2026-01-01T00:00:{i:02d}",
            "purpose": purpose, "endpoint": endpoint, "messages": json.dumps([{"role": "user", "content": text}]),
            "prompt_tokens": prompt, "completion_tokens": completion, "latency_s": 0.5}


def _episodes(cell, n_episodes, steps, base=100, growth=20):
    """``n_episodes`` episodes in turn, each prompt extending the last one (``growth`` tokens a step)."""
    out, i = [], 0
    for e in range(n_episodes):
        text = f"task {e} " + "x" * 40
        for s in range(steps):
            out.append(_record(cell, i, text, base + growth * s))
            text += f" step {s} obs " + "y" * 30
            i += 1
    return out


def test_chains_find_each_episode_and_its_steps():
    rows = _episodes("toy/play/m", 2, 3)
    steps = [s for s, _ in est.chains(rows)]
    assert steps == [1, 2, 3, 1, 2, 3]
    shares = [round(sh, 2) for _, sh in est.chains(rows)]
    assert shares[1] > 0.5 and shares[2] > shares[1]  # later steps repeat more of the previous prompt


class ToyStudy:
    """The methods :func:`derive_profiles` and :func:`estimate` read of a study."""

    name, enabled = "toy", True

    def __init__(self, episodes, steps, design=None):
        self.episodes, self.steps, self.design = episodes, steps, dict(design or {})

    def design_figures(self, measured):
        return dict(self.design)

    def workload(self):
        return [Work("play", "m", "actor", units=self.episodes, steps=self.steps, jobs=1, episodes=self.episodes),
                Work("play", "m", ANY, units=self.episodes)]

    def profile_key(self, cell_id, purpose):
        return cell_id.split("/")[1], purpose


class Ep:
    provider, max_concurrency, rpm, tpm, task = "openai", 4, None, None, "chat"
    price = Price(1.0, 2.0, cached_input_per_mtok=0.5)


def test_derived_profiles_predict_a_larger_design():
    rows = _episodes("toy/play/m", 4, 3) + [_record("toy/play/m", 90 + k, f"update {k}", 50, 10, purpose="update")
                                            for k in range(2)]
    prof = est.derive_profiles(rows, {"toy": ToyStudy(4, 3)})
    actor, update = prof["toy/play/actor"], prof["toy/play/update"]
    assert actor.calls_per_unit == pytest.approx(1.0) and actor.prompt_base == pytest.approx(100)
    assert actor.prompt_per_step == pytest.approx(20) and update.calls_per_unit == pytest.approx(0.5)
    # a design of 10 episodes of 5 steps: the line extrapolates to steps 4 and 5
    truth = _episodes("toy/play/m", 10, 5)
    got = est.estimate({"toy": ToyStudy(10, 5)}, {"m": Ep()}, prof, hosted_latency_s=1.0)[("toy", "m")]
    assert got.calls == pytest.approx(50 + 5) and got.jobs == 1 and got.episodes == 10
    assert got.input_tokens == pytest.approx(sum(r["prompt_tokens"] for r in truth) + 5 * 50)
    usd, usd_cached = est.dollars(got, Ep())
    assert usd_cached < usd and got.cacheable_tokens > 0


def test_wall_time_takes_the_slowest_of_concurrency_and_rate_limits():
    t = Tally(calls=600, input_tokens=600_000, output_tokens=0, call_seconds=600.0, parallel=100)
    ep = Ep()
    assert est.wall_seconds(t, ep) == pytest.approx(150.0)  # 600 s of calls, 4 at a time
    ep.rpm = 60
    assert est.wall_seconds(t, ep) == pytest.approx(600.0)
    ep.tpm = 10_000
    assert est.wall_seconds(t, ep) == pytest.approx(3600.0)
    ep.rpm = ep.tpm = None


def test_profile_table_refuses_unknown_keys(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"a/b/c": {"calls_per_unit": 1}}}))
    with pytest.raises(ValueError, match="missing keys"):
        est.load_profiles(path)


def test_study_workloads_count_their_designs():
    """Each study's rows are its design's counts (the default config)."""
    from memtrials.__main__ import check_studies
    from memtrials.config import load_config

    config = load_config("config/config.yaml", [])
    studies = check_studies(config, ["config/config.yaml"])
    luck = {w.purpose: w.units for w in studies["luck"].workload()}
    worlds = config["luck"]["worlds"]["domains"] * config["luck"]["worlds"]["per_domain"]
    assert luck == {"writer": 12 * worlds, "reader": 32 * worlds}
    h = config["history"]
    rollouts = [w for w in studies["history"].workload() if w.part == "rollouts" and w.purpose == "actor"]
    n_conditions = len(h["conditions"]) + len(h["chat_conditions"])
    assert len(rollouts) == len(h["envs"]) * n_conditions and {w.steps for w in rollouts} == {h["actor"]["max_actions"]}
    a = config["antipersist"]
    train = [w for w in studies["antipersist"].workload() if w.part.startswith("train/") and w.purpose == "actor"]
    assert sum(w.episodes for w in train) == len(a["envs"]) * len(a["designs"]) * a["rounds"] * a["round_size"]
    for name, study in studies.items():
        rows = study.workload()
        assert rows and all(w.endpoint in config_models(config) for w in rows), name


def config_models(config):
    from memtrials.config import load_models

    return load_models(config["models_file"])


def test_tasks_of_a_whole_split():
    from memtrials.pipeline.workload import tasks_of

    envs = {"alfworld": {"source": "official"}, "appworld": {"source": "official"}, "seed": 0}
    assert tasks_of("alfworld", "eval_out_of_distribution", None, envs) == 134
    assert tasks_of("appworld", "test_normal", None, envs) == 168 and tasks_of("appworld", "dev", 5, envs) == 5


def test_estimate_of_the_default_config_has_figures_for_every_purpose(capsys):
    """Every study prints, every purpose has figures (measured, or from the design and listed as such)."""
    assert main(["estimate"]) == 0
    out = capsys.readouterr().out
    for study in ("luck", "history", "calibrator", "playbook", "antipersist"):
        assert f"\n{study} " in out
    assert "no measured figures" not in out, out[-1500:]


PRESETS = ["luck", "history", "calibrator", "playbook", "antipersist"]


@pytest.mark.parametrize("preset", PRESETS)
def test_estimate_of_each_paper_preset_runs(preset, capsys):
    """The README's commands: each paper preset on the example hosted endpoint, every purpose with figures."""
    extra = ["examples/estimate/official-splits.yaml"] if preset == "history" else []
    files = [f"config/presets/{preset}-paper.yaml", *extra, "config/presets/example-hosted.yaml"]
    assert main(["estimate", "--studies", preset, "--configfile", *files]) == 0
    out = capsys.readouterr().out
    assert "gpt-4.1-mini" in out and f"\n{preset} " in out
    assert "no measured figures" not in out, out[-1500:]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_purpose_of_a_paper_preset_has_figures(preset):
    """Each paper preset as it stands (every study it enables, its own panel): no row of any
    study's workload lacks figures, and each figure is measured or says how the design gives it."""
    from memtrials.__main__ import check_studies
    from memtrials.config import load_config, load_models

    extra = ["examples/estimate/official-splits.yaml"] if preset == "history" else []  # the paper's 500 tasks a cell
    files = ["config/config.yaml", f"config/presets/{preset}-paper.yaml", *extra]
    config = load_config(files[0], files[1:])
    studies = check_studies(config, files)
    measured, _ = est.load_profiles(config["estimate"]["profiles"])
    rows = est.estimate(studies, load_models(config["models_file"]), measured, hosted_latency_s=1.0)
    assert rows and not set().union(*(t.unmeasured for t in rows.values()))
    figures = est.with_design(studies, measured)
    designed = set().union(*(t.designed for t in rows.values()))
    assert all(figures[k].source == "design" and figures[k].basis and k not in measured for k in designed)
    assert all(figures[k].source == "measured" for k in figures if k not in designed and k in measured)


def test_design_figures_fill_only_what_is_not_measured(capsys):
    """A study's design figure counts where the table lacks the purpose, is marked as such (the
    column ``design``, the footer), and yields to a measured one."""
    update = Profile(calls_per_unit=0.5, prompt_base=50, prompt_per_step=0, completion=10, prefix_share=0,
                     latency_s=1.0, calls=0, basis="one update per two episodes")
    rows = _episodes("toy/play/m", 4, 3)
    measured = est.derive_profiles(rows, {"toy": ToyStudy(4, 3)})
    assert "toy/play/update" not in measured
    toy = ToyStudy(4, 3, {"toy/play/update": update, "toy/play/actor": replace(update, prompt_base=1e6)})
    got = est.estimate({"toy": toy}, {"m": Ep()}, measured, hosted_latency_s=1.0)[("toy", "m")]
    assert got.designed == {"toy/play/update"} and not got.unmeasured
    assert got.calls == pytest.approx(12 + 2) and got.design_tokens == pytest.approx(2 * 60)
    text = est.render({("toy", "m"): got}, {"m": Ep()})
    assert "figures from the design" in text and "toy/play/update" in text and "no measured" not in text
    measured["toy/play/update"] = replace(update, prompt_base=70.0, source="measured")
    got = est.estimate({"toy": toy}, {"m": Ep()}, measured, hosted_latency_s=1.0)[("toy", "m")]
    assert not got.designed and got.design_tokens == 0 and got.input_tokens > 2 * 70


def test_calls_are_keyed_as_the_design_makes_them():
    """The anti-persistence study's ReAct cells make no memory call (no '*' row), ExpeL and
    AutoRefine name theirs (retrieval on the embedder, learning only in training); the playbook
    study's choice and evaluation cells make actor calls only; Pooled's practice round is keyed
    ``pooled``, as its workload row; the calibrator's judge compares each pair twice."""
    from memtrials.__main__ import check_studies
    from memtrials.config import load_config

    files = ["config/config.yaml", "config/presets/antipersist-paper.yaml"]
    studies = check_studies(load_config(files[0], files[1:]), files, ["antipersist"])
    ap = studies["antipersist"]
    rows = ap.workload()
    by = lambda part: {(w.purpose, w.endpoint) for w in rows if w.part == part}  # noqa: E731
    emb = str(ap.embedder)
    assert {p for p, _ in by("train/react") | by("eval/react")} == {"actor"}
    assert {p for p, e in by("train/expel") if e != emb} == {"actor", "expel_insights"}
    assert ("expel_retrieval", emb) in by("train/expel") and ("expel_retrieval", emb) in by("eval/expel")
    assert {p for p, _ in by("eval/expel")} == {"actor", "expel_retrieval"}
    assert {p for p, _ in by("eval/autorefine")} == {"actor", "autorefine_retrieval"}
    assert ANY in {p for p, _ in by("train/trajectory")}  # undeclared: the measured table's purposes

    files = ["config/config.yaml", "config/presets/playbook-paper.yaml"]
    pb = check_studies(load_config(files[0], files[1:]), files, ["playbook"])["playbook"]
    rows = pb.workload()
    assert {w.purpose for w in rows if w.part in ("choice", "eval")} == {"actor"}
    assert {w.purpose for w in rows if w.part == "pooled"} == {"actor", ANY}
    assert pb.profile_key("playbook/std/m/alfworld/v/practice/runpooled", "actor") == ("pooled", "actor")
    assert pb.profile_key("playbook/std/m/alfworld/v/pooled/merge", "pooled_merge") == ("pooled", "pooled_merge")
    assert pb.profile_key("playbook/std/m/alfworld/v/practice/run2", "actor") == ("practice", "actor")

    files = ["config/config.yaml", "config/presets/calibrator-paper.yaml"]
    config = load_config(files[0], files[1:])
    cal = check_studies(config, files, ["calibrator"])["calibrator"]
    compare = [w for w in cal.workload() if w.part == "compare"]
    contexts = int(config["calibrator"]["contexts"]["count"])
    assert compare and {w.units for w in compare} == {2 * contexts}


def _policy(body):
    from tests.history.helpers import is_judge, is_review, wrap
    from memtrials.testing.policies import fill_schema, schema_of

    if is_judge(body):
        return '{"supports_repetition": false}'
    if is_review(body):
        return '{"decision":"CALIBRATE","experience":"Looking around again shows the same room."}'
    schema = schema_of(body)
    if schema is not None and "answer" not in (schema.get("properties") or {}):
        return json.dumps(fill_schema(schema))  # a luck writer's lesson, a reader's answer
    return wrap(body, "look around")


def _overlay(tasks: int, steps: int, conditions: list[str], per_domain: int, rounds: int) -> dict:
    return {
        "models_file": "models.yaml", "panel": ["loop"],
        "roles": {"judge": "loop", "calibrator": "loop", "generator": "loop", "reflector": "loop", "curator": "loop",
                  "embedder": "emb"},
        "luck": {"worlds": {"domains": 1, "per_domain": per_domain, "margin": 0.10}},
        "history": {
            "enabled": True, "envs": ["scienceworld"], "splits": {"scienceworld": "test"}, "seed": 1,
            "env_options": {"scienceworld": {"simplification": ""}}, "task_types": {"scienceworld": None},
            "tasks_per_cell": tasks, "in_flight": 1, "conditions": conditions, "chat_conditions": [],
            "actor": {"mode": "choice", "max_actions": steps, "max_output_tokens": 32, "max_listed_actions": 10},
            "continuation": {"enabled": True, "sources_per_cell": 1, "conditions": ["raw", "experience"],
                             "chat_conditions": []},
            "probe": {"enabled": True}},
        "antipersist": {
            "enabled": True, "envs": ["scienceworld"], "designs": ["react", "reflexion", "trajectory"],
            "rounds": rounds, "round_size": 2, "in_flight": 1,
            "pools": {"scienceworld": {"train_split": "train", "train_tasks": 3, "eval_split": "test",
                                       "eval_tasks": tasks}},
            "actor": {"mode": "choice", "max_actions": steps, "max_output_tokens": 32, "max_listed_actions": 5,
                      "listing": "sample"}},
        "calibrator": {"enabled": False}, "playbook": {"enabled": False},
    }


def _actual(records) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for r in records:
        acc = out.setdefault(str(r["cell_id"]).split("/")[0], [0, 0])
        acc[0] += 1
        acc[1] += int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0)
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.slow
def test_estimate_predicts_a_loopback_run(tmp_path, monkeypatch, capsys):
    """Figures derived from a small run (A: 1 task, 3 actions, 2 history conditions, 4 worlds, 1
    training round) predict a larger one (B: 2 tasks, 4 actions, 3 conditions, 8 worlds, 2
    rounds): calls within 10 %, tokens (prompt + completion) within 25 %, per study (history:
    rollouts, continuation, probe; luck: writers and readers; anti-persistence: ReAct,
    Reflexion and Trajectory memory, training and evaluation)."""
    from memtrials.__main__ import check_studies
    from memtrials.config import load_config, load_models
    from memtrials.testing import LoopbackServer, loopback_embed_endpoint, loopback_endpoint
    from tests.antipersist.helpers import task_table
    from tests.conftest import copy_workflow, failure_text

    wf = copy_workflow(tmp_path / "wf")
    task_table(wf / "results" / "tasks" / "scienceworld.parquet")
    cells = "results/history/{}/loop/scienceworld{}.parquet"
    fixed = [cells.format("probe", ""), *(cells.format("continuation", f"/{c}") for c in ("raw", "experience")),
             "results/luck/loop/answers.parquet"]
    studies_run = ["luck", "history", "antipersist"]
    with LoopbackServer(policy=_policy) as srv:
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv),
                                                                      "emb": loopback_embed_endpoint(srv)}}))
        runs = {"a": _overlay(1, 3, ["raw", "experience"], 4, 1),
                "b": _overlay(2, 4, ["raw", "experience", "causal"], 8, 2)}
        for name, overlay in runs.items():
            (wf / f"{name}.yaml").write_text(yaml.safe_dump(overlay))
            monkeypatch.chdir(wf)
            config = load_config("config/config.yaml", [f"{name}.yaml"])
            studies = check_studies(config, ["config/config.yaml", f"{name}.yaml"], studies_run)
            base = "results/antipersist/loop/scienceworld/{}/seed1/{}.parquet"
            targets = fixed + [cells.format("rollouts", f"/{c}") for c in overlay["history"]["conditions"]] \
                + [base.format(d, part) for d in overlay["antipersist"]["designs"] for part in ("train", "eval")]
            out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", f"{name}.yaml",
                                  "--", *targets], cwd=wf, capture_output=True, text=True, timeout=900)
            assert out.returncode == 0, failure_text(out)
            records = est.read_journals(wf / "results" / "records")
            if name == "a":
                profiles = est.derive_profiles(records, studies, load_models("models.yaml"))
                (wf / "results" / "records").rename(wf / "records-a")
                for p in (wf / "results" / "luck" / "freeze").glob("*"):  # B's worlds: registered anew
                    p.unlink()
                continue
            rows = est.estimate(studies, load_models("models.yaml"), profiles, hosted_latency_s=1.0)
    actual = _actual(records)
    errors = {}
    for study in studies_run:
        calls = sum(t.calls for (s, _), t in rows.items() if s == study)
        tokens = sum(t.input_tokens + t.output_tokens for (s, _), t in rows.items() if s == study)
        errors[study] = (calls / actual[study][0] - 1, tokens / actual[study][1] - 1)
    with capsys.disabled():
        print("\nestimate vs recorded (relative error of calls, tokens):",
              {k: (f"{c:+.1%}", f"{t:+.1%}") for k, (c, t) in errors.items()}, "recorded:", actual)
    for study, (calls, tokens) in errors.items():
        assert abs(calls) <= 0.10, (study, errors, actual)
        assert abs(tokens) <= 0.25, (study, errors, actual)


def test_add_profiles_adds_only_what_the_table_lacks(tmp_path):
    """``estimate --derive FILE --add RUN``: a measured purpose the table lacks is added with its
    run noted; the table's own entries stay."""
    path = tmp_path / "p.yaml"
    kept = Profile(1.0, 10, 0, 1, 0, 0.1, 5)
    est.write_profiles(path, {"toy/play/actor": kept}, {"run": "first"})
    new = est.derive_profiles(_episodes("toy/play/m", 4, 3) + [_record("toy/play/m", 90, "u", 50, purpose="update")],
                              {"toy": ToyStudy(4, 3)})
    assert est.add_profiles(path, new, {"run": "second", "date": "2026-12-05"}) == ["toy/play/update"]
    table, header = est.load_profiles(path)
    assert table["toy/play/actor"] == kept and table["toy/play/update"].calls == 1
    assert header["run"] == "first" and header["additions"] == [
        {"run": "second", "date": "2026-12-05", "profiles": ["toy/play/update"]}]
    assert est.add_profiles(path, new, {"run": "third"}) == []
