"""The calibrator's prompt files match the digests pinned in their SOURCES.md, and the texts
the paper prints that the calibrator uses (the G.2 review and its two outputs, which are the
SFT targets) are the paper's lines."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from memtrials.studies.history.calibrator.labels import target_text
from memtrials.studies.history.calibrator.prompts import PROMPT_FILES, CalibratorPrompts

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "config/prompts/calibrator"
PAPER = REPO / "tests/history/data/paper_prompts.txt"


def test_prompt_files_match_their_pinned_digests():
    pinned = {}
    for line in (FOLDER / "SOURCES.md").read_text().splitlines():
        if line.startswith("| `") and "sha256:" in line:
            pinned[line.split("`")[1]] = line.split("sha256:")[1].strip(" |`")
    assert set(pinned) == set(PROMPT_FILES)
    for name in PROMPT_FILES:
        assert hashlib.sha256((FOLDER / name).read_bytes()).hexdigest() == pinned[name], f"{name} changed"
    p = CalibratorPrompts.load(FOLDER)
    msgs = p.compare_messages("PROMPT", "x", "y")
    assert "PROMPT" in msgs[1]["content"] and "Candidate action A:\nx" in msgs[1]["content"]


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def test_sft_targets_are_the_two_outputs_the_paper_prints():
    # G.2: 'The only valid outputs are {"decision":"NOUPDATE","experience":null} and
    # {"decision":"CALIBRATE","experience":"..."}' (braces restored, as the history study's copy)
    paper = _squash(PAPER.read_text())
    assert _squash(target_text("NOUPDATE", None)).strip("{}") in paper
    calibrate = _squash(target_text("CALIBRATE", "...")).strip("{}")
    assert calibrate in paper
    assert json.loads(target_text("CALIBRATE", 'say "x"'))["experience"] == 'say "x"'


def test_joint_calibration_block_is_the_g3_form():
    # G.3: 'either <calibration>{"decision":"NOUPDATE", "experience":null}</calibration> or a
    # CALIBRATE decision with an experience string' (braces lost in the paper's text copy)
    from memtrials.studies.history.calibrator.joint import calibration_block

    paper = re.sub(r"\s+", "", (REPO / "tests/calibrator/data/paper_g3.txt").read_text())
    block = calibration_block("NOUPDATE", None)
    assert block.replace("{", "").replace("}", "") in paper
    assert calibration_block("INVALID", None) == block
    assert json.loads(calibration_block("CALIBRATE", "x")[len("<calibration>"):-len("</calibration>")]) == \
        {"decision": "CALIBRATE", "experience": "x"}
