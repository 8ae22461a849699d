"""The HTML report (`snakemake --report results/report.html`) opened in headless Chromium.

What it is built on: a tiny run of all five studies and the scorecard in a copy of the workflow,
on the loopback endpoint (the scripted policies of tests/luck/test_luck_e2e.py,
tests/history/test_history_workflow.py, tests/antipersist/helpers.py; for the playbook, its
known-answer run's planted policy on the tests' lesson bank, tests/playbook/planted_plant.py):
Lessons from Luck at the default size (4 worlds); the history study on one ScienceWorld task
(Raw and Causal rollouts, Raw and Reference continuation, the probe); the calibrator's chain
without its fine-tune (the Calibrator and joint-actor cells on the same task,
tests/calibrator/test_disjoint_workflow.py's design); the anti-persistence study's Trajectory
and Anti-Persistence designs, one round of one task; the playbook study's whole chain on the
planted world (envs/planted: a real environment, no data, microseconds a step): one ACE setting,
K = 2 growth runs (so Figure 6 has K = 1 and 2), their practice rounds, the choice, the
evaluation of its five candidates, the default baselines (Random, Own, Top-k, DG-Mem, the
subsampled rounds), the report and the diagnostics; and the scorecard of the endpoint, every
study's line run. Every figure kind of every study is drawn, the playbook's diagnostics too.
Then the report is opened as a person would, through the report's own app: each table and figure
is selected and shown, the figure's image must be there and not blank (pixel spread of a
screenshot), each table must render (rows, cells, a non-blank screenshot; a table without rows
shows "(no rows)"), every entry carries its caption, and the page logs no error.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from memtrials.envs.planted.agent import act, prompt_text
from memtrials.envs.planted.world import current_code
from memtrials.studies.playbook.planted import make_policy as planted_playbook
from memtrials.testing import LoopbackServer, loopback_embed_endpoint, loopback_endpoint
from memtrials.testing.policies import grammar_choices, schema_of
from tests.antipersist.helpers import policy as antipersist_policy
from tests.chromium import CHROMIUM_MISSING, Chromium, chromium_path, pixel_spread
from tests.conftest import REPO, base_config, copy_workflow, run_snakemake, failure_text
from tests.history.helpers import is_judge, is_review, wrap
from tests.luck.test_luck_e2e import policy as luck_policy
from tests.playbook.helpers import ACE_CURATOR, REFLECTOR
from tests.playbook.planted_plant import plant

STUDIES = {"luck": "Lessons from Luck", "history": "History interventions", "antipersist": "Anti-persistence",
           "calibrator": "The learned calibrator", "playbook": "Playbook curation"}
"""The studies the tiny run builds: every registered study, by its report category."""
FIGURES = {
    "luck": {"figure1_p2_p3m"},
    "history": {"figure2_recovery", "figure3_prompt_lengths", "figure4_change_from_raw", "figure5_repetition",
                "figure8_recovery_conditions"},
    "antipersist": {"heldout_per_round", "success_per_round"},
    "calibrator": {"figure10_next_action", "figure7_success", "figure9_joint"},
    "playbook": {"figure2_runs", "figure6_runs"},
}
"""Every figure each study draws (the playbook's diagnostics draw theirs under Diagnostics)."""
DIAGNOSTICS = {"figures": {"figure5_tags_vs_effects"},
               "tables": {"table_tags_vs_effects", "table_block_tags", "table17_subsampled", "table14_split_half"}}
"""The playbook diagnostics' figures and the tables every run of theirs writes (Table 4's harmful
blocks only where a run's whole playbook scores below No playbook)."""
PLAYBOOK_TABLES = {"table1_methods", "table1_every_method", "table5_growth_runs", "table10_parts", "table12_13_costs",
                   "candidates", "table17_subsampled_rounds", "table9_dgmem", "table13_by_runs", "table13_level"}
"""The playbook tables this design writes (the default baselines; no long growth); the practice-versus-
evaluation tables only where their correlation is defined."""
HISTORY_FIGURES = FIGURES["history"]
TYPES = ("find-non-living-thing", "lifespan-longest-lived", "lifespan-shortest-lived")
TASKS = [(f"{t}:{v}", split) for v, split in ((0, "test"), (1, "train")) for t in TYPES]
"""ScienceWorld: variation 0 is evaluated (history, the Calibrator, anti-persistence's held-out
pool), variation 1 trains (the calibrator's sources, anti-persistence's stream)."""


PLAYBOOK = planted_playbook(plant(), act)
"""The playbook study's Reflector, Curator and planted-world actor: the known-answer run's planted policy
(memtrials.studies.playbook.planted) on the tests' lesson bank (tests/playbook/planted_plant.py): the
Curator writes the bank's lessons, each with a hidden effect on the actor's chance of the right action."""


def policy(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    if (msgs and str(msgs[0].get("content", "")).startswith((REFLECTOR, ACE_CURATOR))) or \
            current_code(prompt_text(body)) is not None:  # ACE's roles, or an actor in the planted world
        return PLAYBOOK(body)
    if msgs and (str(msgs[0].get("content", "")).startswith("You are an expert in running operational tasks")
                 or "Memory items saved from earlier runs" in str(msgs[-1].get("content", ""))):
        return luck_policy(body)  # a luck writer or reader
    if is_judge(body):
        return '{"supports_repetition": false}'
    if is_review(body):
        return '{"decision":"CALIBRATE","experience":"Looking around again shows the same room."}'
    # an actor looks around (never wins: every Raw rollout is a continuation source); the other
    # roles (synthesis, screen, comparison) answer their schema as the anti-persistence tests do
    if "answer" in ((schema_of(body) or {}).get("properties") or {}):
        return wrap(body, "look around")
    choices = grammar_choices(body)
    if choices:
        return "look around" if "look around" in choices else choices[0]
    if schema_of(body) is not None:
        return antipersist_policy(body)
    return "look around"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A workflow copy with every study and the scorecard built small and ``results/report.html`` made."""
    wf = copy_workflow(tmp_path_factory.mktemp("report") / "wf")
    (wf / "results" / "tasks").mkdir(parents=True)
    pd.DataFrame({"task_id": [t for t, _ in TASKS], "env": "scienceworld", "split": [s for _, s in TASKS],
                  "type": [t.split(":")[0] for t, _ in TASKS], "source": "official", "detail": "{}"}
                 ).to_parquet(wf / "results" / "tasks" / "scienceworld.parquet")
    base = yaml.safe_load((wf / "config/config.yaml").read_text())
    with LoopbackServer(policy=policy, embed_dim=32) as srv:
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {
            "loop": loopback_endpoint(srv), "emb": loopback_embed_endpoint(srv)}}))
        roles = sorted(set(base["roles"]) | {"judge", "calibrator", "generator"})
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"],
            "roles": {**{r: "loop" for r in roles}, "embedder": "emb"},
            "smoke": {"enabled": False}, "envs": {"run": []},
            "history": {"envs": ["scienceworld"], "splits": {"scienceworld": "test"}, "tasks_per_cell": 1,
                        "in_flight": 1, "conditions": ["raw", "causal"], "chat_conditions": [],
                        "actor": {"max_actions": 4},
                        "continuation": {"conditions": ["raw", "reference"], "chat_conditions": []},
                        "analysis": {"n_boot": 200}},
            "calibrator": {"splits": {"scienceworld": "train"},
                           "sources": {"envs": ["scienceworld"], "tasks_per_cell": 1},
                           "contexts": {"count": 2}, "rollouts": {"envs": ["scienceworld"], "trained": []},
                           "train": {"enabled": False}, "ablation": {"enabled": False},
                           "joint": {"max_output_tokens": 32}},
            "antipersist": {"envs": ["scienceworld"], "designs": ["trajectory", "antipersist"], "rounds": 1,
                            "round_size": 1, "in_flight": 1,
                            "pools": {"scienceworld": {"train_split": "train", "train_tasks": 1,
                                                       "eval_split": "test", "eval_tasks": 1}},
                            "actor": {"mode": "choice", "max_actions": 2, "max_output_tokens": 16,
                                      "max_listed_actions": 5}},
            # the playbook on the planted world (its task table built by rule env_tasks): one ACE setting,
            # K = 2 runs of two Curator calls (four lessons each), the default baselines on it
            "playbook": {"envs": ["planted"], "systems": ["ace"], "exclude": [], "tokenizer": "pieces",
                         "actor": {"max_actions": 6},
                         "growth": {"runs": 2, "train_tasks": 4, "batch_size": 2},
                         "measurement": {"blocks": 2, "practice_tasks": 4, "episodes": 16},
                         "choice": {"episodes": 4}, "evaluation": {"tasks": 3, "seeds": 1},
                         "baselines": {"envs": ["planted"], "subsampled_settings": ["planted:ace-passfail"]},
                         "known_answer": {"enabled": False}},
            "scorecard": {"n_boot": 200},
        }
        # other studies of the copied workflow off (only those above are built here)
        overlay.update({k: {"enabled": False} for k, v in base.items()
                        if isinstance(v, dict) and "enabled" in v and k not in (*STUDIES, "smoke", "scorecard")})
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        out = run_snakemake(wf, "--configfile", "overlay.yaml")
        assert out.returncode == 0, failure_text(out)
    out = run_snakemake(wf, "--configfile", "overlay.yaml", "--report", "results/report.html")
    assert out.returncode == 0, failure_text(out)
    return wf


async def _view(report: Path, profile: Path, shots: Path) -> dict[str, Any]:
    """Open the report and show every result through its app; what the page showed."""
    facts: dict[str, Any] = {"figures": {}, "tables": {}}
    async with Chromium(profile) as page:
        await page.open(report.as_uri())
        await page.wait_for("typeof app !== 'undefined' && document.querySelector('#app').innerText.includes('Workflow')")
        front = await page.screenshot()
        (shots / "front.png").write_bytes(front)
        facts["front"] = pixel_spread(front)
        facts["categories"] = await page.js("categories")
        facts["results"] = await page.js(
            "Object.fromEntries(Object.entries(results).map(([k, v]) => [k, {mime: v.mime_type, caption: v.caption}]))")
        for path, res in facts["results"].items():
            key = json.dumps(path)
            # select the entry (its info panel shows the caption), then press its view button
            await page.js(f"app.showResultInfo({key})")
            shown = await page.wait_for(f"(() => {{ const t = document.querySelector('#app').innerText; "
                                        f"return t.includes({key}) ? t : null; }})()")
            await page.js("document.querySelector('#app table tbody a').click()")
            if res["mime"] == "image/png":
                box = await page.wait_for(
                    f"(() => {{ const i = [...document.querySelectorAll('#app img')].find("
                    f"x => x.src === results[{key}].data_uri); if (!i || !i.complete || !i.naturalWidth) return null; "
                    "const r = i.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height, "
                    "natural: [i.naturalWidth, i.naturalHeight]}; })()")
                png = await page.screenshot({k: box[k] for k in ("x", "y", "width", "height")})
                facts["figures"][path] = {"natural": box["natural"], "spread": pixel_spread(png), "panel": shown}
            else:
                await page.wait_for(f"(() => {{ const f = document.querySelector('#app iframe'); "
                                    f"return f && f.src === results[{key}].data_uri; }})()")
                ctx = await page.frame_context("data:")
                table = await page.wait_for(
                    "(() => { const t = document.querySelector('table'); if (!t) return null; "
                    "const r = t.getBoundingClientRect(); return {rows: t.querySelectorAll('tr').length, "
                    "cells: t.querySelectorAll('td, th').length, width: r.width, height: r.height}; })()",
                    context_id=ctx)
                frame = await page.js("(() => { const r = document.querySelector('#app iframe').getBoundingClientRect(); "
                                      "return {x: r.x, y: r.y, width: r.width, height: Math.min(r.height, 700)}; })()")
                png = await page.screenshot(frame)
                facts["tables"][path] = {**table, "spread": pixel_spread(png), "panel": shown}
            (shots / (Path(path).name + ".png")).write_bytes(png)
        facts["errors"] = page.errors()
    return facts


@pytest.fixture(scope="module")
def view(built, tmp_path_factory) -> dict[str, Any]:
    assert chromium_path(), CHROMIUM_MISSING
    tmp = tmp_path_factory.mktemp("chromium")
    (tmp / "shots").mkdir()
    return asyncio.run(_view(built / "results" / "report.html", tmp / "profile", tmp / "shots"))


def _on_disk(wf: Path) -> dict[str, dict[str, set[str]]]:
    out = {title: {"Figures": {p.relative_to(wf).as_posix() for p in (wf / "results" / s / "figures").glob("*.png")},
                   "Tables": {p.relative_to(wf).as_posix() for p in (wf / "results" / s / "tables").glob("*.html")}}
           for s, title in STUDIES.items()}
    diag = wf / "results/playbook/diagnostics"
    out[STUDIES["playbook"]]["Diagnostics"] = {p.relative_to(wf).as_posix() for p in
                                               [*(diag / "tables").glob("*.html"), *(diag / "figures").glob("*.png")]}
    out["Scorecard"] = {"Endpoints": {p.relative_to(wf).as_posix() for p in (wf / "results/scorecard").glob("*.html")}}
    return out


@pytest.mark.slow
def test_report_holds_every_table_and_figure_grouped_by_study(built, view):
    on_disk = _on_disk(built)
    assert {c: {s: set(v) for s, v in subs.items()} for c, subs in view["categories"].items()} == on_disk
    assert all(files for subs in on_disk.values() for files in subs.values()), on_disk
    for study, title in STUDIES.items():  # every figure each study draws
        assert {Path(p).stem for p in on_disk[title]["Figures"]} == FIGURES[study], study
    playbook = on_disk[STUDIES["playbook"]]
    assert PLAYBOOK_TABLES <= {Path(p).stem for p in playbook["Tables"]}, playbook["Tables"]
    diagnostics = {Path(p).stem for p in playbook["Diagnostics"]}
    assert DIAGNOSTICS["figures"] | DIAGNOSTICS["tables"] <= diagnostics, diagnostics
    assert {Path(p).stem for p in playbook["Diagnostics"] if p.endswith(".png")} == DIAGNOSTICS["figures"]
    by_runs = pd.read_csv(built / "results/playbook/tables/table13_by_runs.csv")  # what Figure 6 draws
    assert {(m, k) for m, k in zip(by_runs["method"], by_runs["runs"])} == {(m, k) for m in ("RBC", "Best-Full")
                                                                            for k in (1, 2)}
    assert on_disk["Scorecard"]["Endpoints"] == {"results/scorecard/loop.html"}


@pytest.mark.slow
def test_the_scorecard_shows_each_study_and_the_run_cost(built, view):
    page = view["tables"]["results/scorecard/loop.html"]
    assert page["rows"] == 1 + 8  # the first table: its header and the eight quantities
    md = (built / "results/scorecard/loop.md").read_text()
    for words in ("P2:", "P3m:", "Causal Transition minus Raw", "Calibrator minus Raw", "RBC minus Whole",
                  "RBC minus No playbook", "Anti-Persistence minus Trajectory"):
        assert words in md, words
    assert "| not run |" not in md  # every study's line was run, the playbook's too
    rbc = [line for line in md.splitlines() if line.startswith("| playbook |") and "RBC minus" in line]
    assert len(rbc) == 2 and all(re.search(r"\[[-+\d.]+, [-+\d.]+\]", line) for line in rbc), rbc
    cost = md.split("## Cost")[1]
    assert "records of this run's jobs" in cost and "cache ledger" in cost


def test_every_study_marks_its_tables_and_figures_for_the_report():
    """Each registered study's report rule marks its tables and figures (``report(...)``) under its
    category, with a caption for every figure it draws; the scorecard is marked too."""
    from memtrials.studies import study_names

    assert set(STUDIES) == set(study_names())
    for study, title in STUDIES.items():
        rules = (REPO / f"workflow/rules/{study}.smk").read_text()
        assert f'"{title}"' in rules, f"{study}: no report(...) under the category {title!r}"
        if study == "luck":
            continue  # one caption file per output (test_luck_report_outputs_have_caption_files)
        for kind, names in (("figures", FIGURES[study]), ("tables", set())):
            caption = (REPO / f"workflow/report/{study}/{kind}.rst").read_text()
            assert f"../report/{study}/{kind}.rst" in rules, (study, kind)
            have = set(re.findall(r'^  "(\w+)":', caption, flags=re.M))
            assert names <= have, f"{study}: no caption for {sorted(names - have)} in workflow/report/{study}/{kind}.rst"
    scorecard = (REPO / "workflow/rules/scorecard.smk").read_text()
    assert '"Scorecard"' in scorecard and (REPO / "workflow/report/scorecard.rst").exists()


@pytest.mark.slow
def test_the_report_loads_without_errors(view):
    assert view["errors"] == [], view["errors"]
    std, share = view["front"]
    assert std > 0.02 and share > 0.01


@pytest.mark.slow
def test_every_entry_shows_its_caption(view):
    for path, res in view["results"].items():
        caption = html.unescape(re.sub(r"<[^>]+>", "", res["caption"])).strip()
        assert caption and "No caption written" not in caption, f"{path}: caption {caption!r}"
        panel = " ".join((view["figures"].get(path) or view["tables"][path])["panel"].split())
        assert " ".join(caption.split()[:8]) in panel, f"{path}: caption not shown in the report"


@pytest.mark.slow
def test_every_figure_is_shown_and_not_blank(built, view):
    import matplotlib.image

    assert view["figures"]
    for path, fig in view["figures"].items():
        img = matplotlib.image.imread(built / path)
        assert fig["natural"] == [img.shape[1], img.shape[0]], path  # the figure's own pixels
        std, share = fig["spread"]
        assert std > 0.02 and share > 0.005, f"{path} looks blank in the report: {fig['spread']}"


@pytest.mark.slow
def test_every_table_renders(view):
    assert view["tables"]
    for path, table in view["tables"].items():
        assert table["rows"] >= 2 and table["cells"] >= 2, (path, table)
        assert table["width"] > 50 and table["height"] > 20, (path, table)
        std, share = table["spread"]
        assert std > 0.02 and share > 0.005, f"{path} looks blank in the report: {table['spread']}"


def test_pixel_spread_tells_a_blank_image_from_a_drawn_one(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for drawn in (False, True):
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.axis("off")
        if drawn:
            ax.plot([0, 1], [0, 1], lw=4)
        fig.savefig(tmp_path / f"{drawn}.png")
        plt.close(fig)
    blank, line = (pixel_spread((tmp_path / f"{d}.png").read_bytes()) for d in (False, True))
    assert blank == (0.0, 0.0) and line[0] > 0.02 and line[1] > 0.005


def test_a_table_without_rows_says_so_in_the_report():
    """A table may be empty by design (Table 4's behaviour rates on a benchmark without a hook): its
    HTML shows its columns and one row saying so, never a bare header or a blank entry."""
    from memtrials.report.tables import EMPTY, table_html

    for df in (pd.DataFrame(columns=["block", "rate_with"]), pd.DataFrame()):
        page = table_html(df, caption="c")
        assert page.count("<tr>") == 2 and f">{EMPTY}</td></tr>" in page, page
        assert f'colspan="{max(1, len(df.columns))}"' in page
    assert EMPTY not in table_html(pd.DataFrame({"a": [1.0]}))


def test_every_figure_has_a_caption_file_and_is_listed_in_its_study_docs():
    luck = [p.stem for p in (REPO / "workflow/report/luck").glob("figure*.rst")]
    assert set(luck) == FIGURES["luck"]
    listed = {"luck": luck}
    for study in ("history", "antipersist", "calibrator", "playbook"):
        listed[study] = re.findall(r'^  "(\w+)":', (REPO / f"workflow/report/{study}/figures.rst").read_text(),
                                   flags=re.M)
        assert set(listed[study]) == FIGURES[study], study
    for doc, names in ((f"docs/{study}.md", names) for study, names in listed.items()):
        text = (REPO / doc).read_text()
        section = re.search(r"^## Figures\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
        assert section, f"{doc} has no '## Figures' section listing the study's figures"
        missing = [n for n in names if f"`{n}`" not in section.group(1)]
        assert not missing, f"{doc}: the Figures list does not name {missing}"


def test_luck_report_outputs_have_caption_files():
    from memtrials.studies.luck.workflow import LuckWorkflow

    cfg = base_config()
    cfg["luck"]["enabled"] = False  # the output lists only; no registry needed
    lw = LuckWorkflow(cfg, {}, lambda model: {})
    names = {Path(p).stem for p in lw.table_paths() + lw.figure_paths() if p.endswith((".html", ".png"))}
    have = {p.stem for p in (REPO / "workflow/report/luck").glob("*.rst")}
    assert names <= have, f"no caption file in workflow/report/luck/ for {sorted(names - have)}"


def test_report_is_documented():
    readme = (REPO / "README.md").read_text()
    assert "snakemake --report results/report.html" in readme
    assert "workflow/report/README.md" in readme
    assert (REPO / "workflow/report/README.md").exists()
    assert os.path.exists(REPO / "workflow/report/workflow.rst")
