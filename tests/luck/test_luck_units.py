"""Cells' small rules: lesson status, the registered recovery rule, answer rows,
arm wiring, table writers, config and preset."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from memtrials.config import load_config
from memtrials.report import table_latex, table_markdown, write_table
from memtrials.studies.luck.design import ARMS, arm_lesson, reader_sample_index, sample_index
from dataclasses import asdict, replace

from memtrials.studies.luck.inference import REGISTERED_RULES, Rules
from memtrials.studies.luck.prompts import PromptSet
from memtrials.studies.luck.readers import answer_row, memory_for, recover_first_tool
from memtrials.studies.luck.worlds import generate_worlds
from memtrials.studies.luck.writers import lesson_row, lesson_status, names_tool

REPO = Path(__file__).resolve().parents[2]
W = generate_worlds(9, 1, 4)[0]
TOOLS = W.tools


def test_lesson_status_and_row():
    assert lesson_status("  \n", "stop") == "empty"
    assert lesson_status("Sorry", "content_filter") == "refusal"
    assert lesson_status("", "stop", refusal="I can't help with that.") == "refusal"
    assert lesson_status("# Memory Item 1", "length") == "ok"
    row = lesson_row("m", W, "RB", "good", "failure", "  # Memory Item 1\nUse x  ", "stop", "c1", "p")
    assert row["lesson"] == "# Memory Item 1\nUse x" and row["sample"] == sample_index("RB", "good", "failure")
    missing = lesson_row("m", W, "N", "bad", "success", "", "stop", "c2", "p")
    assert missing["lesson"] is None and missing["status"] == "empty" and missing["lesson_sha256"] is None
    assert names_tool(f"prefer {W.worse_name.capitalize()} next time", W.worse_tool, W.worse_name)
    assert not names_tool("prefer the other one", W.worse_tool, W.worse_name)


def test_sample_indices_are_distinct():
    assert sorted(sample_index(i, d, o) for i in ("RB", "RBD", "N") for d in ("good", "bad")
                  for o in ("success", "failure")) == list(range(12))
    assert sorted(reader_sample_index(d, o, a) for d in ("good", "bad") for o in ("success", "failure")
                  for a in ARMS) == list(range(32))


def test_recovery_rule():
    a, b = TOOLS
    assert recover_first_tool('{"first_tool": "' + a + '", "reason": "cut', TOOLS) == a
    assert recover_first_tool(f'first_tool: {b}', TOOLS) == b
    assert recover_first_tool(f'{{"first_tool": "{a}"}} or {{"first_tool": "{b}"}}', TOOLS) is None
    assert recover_first_tool(f'{{"first_tool": "{a}"}} {{"first_tool": "{a}"}}', TOOLS) == a
    assert recover_first_tool('{"first_tool": "other_tool"}', TOOLS) is None
    assert recover_first_tool(f"I would use {a}", TOOLS) is None  # no first_tool value
    assert recover_first_tool("", TOOLS) is None


def test_recovery_of_a_mixed_reply():
    """The paper's rule: the values name exactly one of the two tools; a value naming
    neither does not block recovery, a value naming both does."""
    a, b = TOOLS
    mixed = f'{{"first_tool": "none yet"}} Let me reconsider. {{"first_tool": "{a}", "reason": "the rec'
    assert recover_first_tool(mixed, TOOLS) == a
    assert recover_first_tool(f'"first_tool": "unknown_tool", "first_tool": "{b}"', TOOLS) == b
    assert recover_first_tool(f'{{"first_tool": "{a} or {b}"}}', TOOLS) is None
    assert recover_first_tool(f'first_tool = {b}\nreason: cut', TOOLS) == b
    assert recover_first_tool('{"first_tool": "", "reason": "x"}', TOOLS) is None


def _result(value, raw, valid=True):
    return SimpleNamespace(value=value, valid=valid, raw=raw, error=None if valid else "bad", call_id="c",
                           finish_reason="stop", structured=True)


def test_answer_rows_score_by_first_tool():
    ok = answer_row("m", W, "good", "failure", "RB", "mem", _result({"first_tool": W.worse_tool, "reason": "r"}, "{}"))
    assert ok["status"] == "valid" and ok["y"] == 1.0
    rec = answer_row("m", W, "good", "failure", "RB", "mem",
                     _result(None, '{"first_tool": "' + W.better_tool + '", "rea', valid=False))
    assert rec["status"] == "recovered" and rec["y"] == 0.0
    bad = answer_row("m", W, "good", "failure", "RB", "mem", _result(None, "no idea", valid=False))
    assert bad["status"] == "invalid" and math.isnan(bad["y"]) and bad["raw"] == "no idea"
    ns = answer_row("m", W, "good", "failure", "RB", None, None)
    assert ns["status"] == "not_scheduled" and math.isnan(ns["y"])


def test_arms_read_the_right_lessons():
    p = PromptSet.load(REPO / "config/prompts/luck")
    lessons = {(W.world_id, i, d, o): f"{i}/{d}/{o}" for i in ("RB", "RBD", "N")
               for d in ("good", "bad") for o in ("success", "failure")}
    assert memory_for("RB", W, "good", "failure", p, lessons) == "RB/good/failure"
    assert memory_for("RBDx", W, "good", "failure", p, lessons) == "RBD/good/success"
    assert memory_for("Nx", W, "bad", "success", p, lessons) == "N/bad/failure"
    assert W.worse_tool in memory_for("PLANTED", W, "bad", "success", p, lessons)
    assert "Memory Item 1" in memory_for("NEUTRAL", W, "bad", "success", p, lessons)
    lessons[(W.world_id, "RB", "good", "success")] = None
    assert memory_for("RBx", W, "good", "failure", p, lessons) is None
    with pytest.raises(ValueError, match="unknown memory arm"):
        arm_lesson("RBX", "success")


def test_table_writers(tmp_path):
    df = pd.DataFrame({"a_b": ["x|y", "50%"], "v": [0.1234, float("nan")], "ok": [True, False]})
    md = table_markdown(df, "cap")
    assert "| x\\|y | 0.123 | yes |" in md and "| 50% | — | no |" in md
    tex = table_latex(df, "A & B", "tab:x")
    assert r"a\_b" in tex and r"50\%" in tex and r"A \& B" in tex and "\\toprule" in tex
    paths = write_table(df, tmp_path / "t", caption="cap")
    assert sorted(p.suffix for p in paths) == [".csv", ".html", ".md", ".tex"]
    assert pd.read_csv(tmp_path / "t.csv").shape == (2, 3)
    assert not list(tmp_path.glob(".*tmp"))
    with pytest.raises(ValueError, match="unknown table format"):
        write_table(df, tmp_path / "t", formats=["xls"])


def test_rules_from_config_need_every_key_and_say_when_not_registered():
    full = asdict(REGISTERED_RULES)
    assert Rules.from_config(full) == REGISTERED_RULES and REGISTERED_RULES.registered
    assert REGISTERED_RULES.caption_note() == ""
    with pytest.raises(ValueError, match=r"unknown keys \['minimum'\]"):
        Rules.from_config({**full, "minimum": 3})
    with pytest.raises(ValueError, match=r"missing keys \['min_complete'\]"):
        Rules.from_config({k: v for k, v in full.items() if k != "min_complete"})
    default = Rules.from_config(load_config(REPO / "config/config.yaml")["luck"]["analysis"])
    assert not default.registered and set(default.differences()) == {"min_complete", "panel_min_endpoints"}
    assert "NOT the registered thresholds" in default.caption_note() and "registered 200" in default.caption_note()


def test_default_config_and_paper_preset():
    default = load_config(REPO / "config/config.yaml")
    assert default["luck"]["worlds"]["per_domain"] % 4 == 0
    assert (default["luck"]["panel"] or default["panel"]) == ["smollm2"]
    paper = load_config(REPO / "config/config.yaml", [REPO / "config/presets/luck-paper.yaml"])
    luck = paper["luck"]
    assert luck["worlds"] == {"domains": 16, "per_domain": 16, "margin": 0.10}
    assert len(luck["panel"]) == 11 and Rules.from_config(luck["analysis"]) == REGISTERED_RULES
    models = yaml.safe_load((REPO / "config/presets/luck-paper.models.yaml").read_text())["endpoints"]
    for name in luck["panel"]:
        e = models[name]
        assert e["api_key_env"] == "OPENROUTER_API_KEY" and e["extra_body"]["provider"]["allow_fallbacks"] is False
        assert e["params"]["max_tokens"] == 16000
        assert not any(k in e for k in ("api_key", "key"))


def test_figure_files_are_deterministic(tmp_path):
    import hashlib

    import numpy as np

    from memtrials.studies.luck.analysis import analyse
    from memtrials.studies.luck.figure import write_figure1
    from memtrials.studies.luck.simulate import simulate_answers
    from memtrials.studies.luck.worlds import worlds_frame

    worlds = generate_worlds(2, 2, 4)
    ans = simulate_answers(worlds, "e", np.random.default_rng(0), p2=0.3)
    q = analyse(ans, worlds_frame(worlds), replace(REGISTERED_RULES, min_complete=4, panel_min_endpoints=1)).quantities
    digests = []
    for i in range(2):
        paths = write_figure1(q, [tmp_path / f"f{i}.png", tmp_path / f"f{i}.svg"])
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in paths])
    assert digests[0] == digests[1]
    assert (tmp_path / "f0.png").read_bytes()[:4] == b"\x89PNG"
