"""The HTML report (`snakemake --report results/report.html`) opened in headless Chromium.

What it is built on: a tiny run of both built studies in a copy of the workflow, on the
loopback endpoint (the scripted policies of tests/luck/test_luck_e2e.py and
tests/history/test_history_workflow.py): Lessons from Luck at the default size (4 worlds)
and the history study on one ScienceWorld task (Raw and Causal rollouts, Raw and Reference
continuation, the probe), so that every figure kind of both studies is drawn.  Then the
report is opened as a person would, through the report's own app: each table and figure
is selected and shown, the figure's image must be there and not blank (pixel spread of a
screenshot), each table must render (rows, cells, a non-blank screenshot), every entry
carries its caption, and the page logs no error.
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

from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.chromium import CHROMIUM_MISSING, Chromium, chromium_path, pixel_spread
from tests.conftest import REPO, base_config, copy_workflow, run_snakemake, failure_text
from tests.history.helpers import is_judge, is_review, wrap
from tests.luck.test_luck_e2e import policy as luck_policy

STUDIES = {"luck": "Lessons from Luck", "history": "History interventions"}
HISTORY_FIGURES = {"figure2_recovery", "figure3_prompt_lengths", "figure4_change_from_raw", "figure5_repetition",
                   "figure8_recovery_conditions"}


def policy(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    if msgs and (str(msgs[0].get("content", "")).startswith("You are an expert in running operational tasks")
                 or "Memory items saved from earlier runs" in str(msgs[-1].get("content", ""))):
        return luck_policy(body)  # a luck writer or reader
    if is_judge(body):
        return '{"supports_repetition": false}'
    if is_review(body):
        return '{"decision":"CALIBRATE","experience":"Looking around again shows the same room."}'
    return wrap(body, "look around")  # never wins: every Raw rollout is a continuation source


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A workflow copy with both studies built small and ``results/report.html`` made."""
    wf = copy_workflow(tmp_path_factory.mktemp("report") / "wf")
    (wf / "results" / "tasks").mkdir(parents=True)
    pd.DataFrame({"task_id": ["find-non-living-thing:0"], "env": "scienceworld", "split": "test",
                  "type": ["find-non-living-thing"], "source": "official", "detail": "{}"}
                 ).to_parquet(wf / "results" / "tasks" / "scienceworld.parquet")
    base = yaml.safe_load((wf / "config/config.yaml").read_text())
    with LoopbackServer(policy=policy) as srv:
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv)}}))
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"], "roles": {r: "loop" for r in base["roles"]},
            "smoke": {"enabled": False}, "envs": {"run": []},
            "history": {"envs": ["scienceworld"], "splits": {"scienceworld": "test"}, "tasks_per_cell": 1,
                        "in_flight": 1, "conditions": ["raw", "causal"], "chat_conditions": [],
                        "actor": {"max_actions": 4},
                        "continuation": {"conditions": ["raw", "reference"], "chat_conditions": []},
                        "analysis": {"n_boot": 200}},
        }
        # other studies of the copied workflow off (only the two above are built here)
        overlay.update({k: {"enabled": False} for k, v in base.items()
                        if isinstance(v, dict) and "enabled" in v and k not in (*STUDIES, "smoke")})
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
    return {title: {"Figures": {p.relative_to(wf).as_posix() for p in (wf / "results" / s / "figures").glob("*.png")},
                    "Tables": {p.relative_to(wf).as_posix() for p in (wf / "results" / s / "tables").glob("*.html")}}
            for s, title in STUDIES.items()}


@pytest.mark.slow
def test_report_holds_every_table_and_figure_grouped_by_study(built, view):
    on_disk = _on_disk(built)
    assert {c: {s: set(v) for s, v in subs.items()} for c, subs in view["categories"].items()} == on_disk
    assert all(on_disk[t]["Figures"] and on_disk[t]["Tables"] for t in on_disk)
    assert {Path(p).stem for p in on_disk["History interventions"]["Figures"]} == HISTORY_FIGURES


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


def test_every_figure_has_a_caption_file_and_is_listed_in_its_study_docs():
    luck = [p.stem for p in (REPO / "workflow/report/luck").glob("figure*.rst")]
    history = re.findall(r'"(figure\w+)":', (REPO / "workflow/report/history/figures.rst").read_text())
    assert set(history) == HISTORY_FIGURES and luck == ["figure1_p2_p3m"]
    for doc, names in (("docs/luck.md", luck), ("docs/history.md", history)):
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
