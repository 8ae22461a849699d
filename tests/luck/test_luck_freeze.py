"""The freeze: registered once, verified by the freeze rule, every writer/reader cell and
the analysis; it covers all study code, the model layer that builds requests, the
endpoints' ids, provider pins and sent parameters; drift is refused with what changed;
re-freeze only on purpose."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from memtrials.config import parse_models
from memtrials.studies.luck.codeset import KNOWN_ANSWER, known_files
from memtrials.studies.luck import entry
from memtrials.studies.luck.freeze import (
    CODE_FILES, FreezeMismatch, build_manifest, main, manifest_digest, register_or_verify,
)
from memtrials.studies.luck.prompts import PromptSet
from memtrials.studies.luck.workflow import LuckWorkflow
from tests.conftest import base_config

REPO = Path(__file__).resolve().parents[2]
SLICE = {"luck": {"seed": 3}, "panel": ["loop"], "endpoints": {"loop": {"params": {}}}}


def registry(**changes):
    endpoint = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "org/model-a",
                "max_concurrency": 2, "params": {"temperature": 0.0, "max_tokens": 64},
                "structured_output": True, "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0},
                "extra_body": {"provider": {"order": ["A"], "allow_fallbacks": False}}}
    endpoint.update(changes)
    return parse_models({"endpoints": {"loop": endpoint}}, "test registry")


def workflow(models=None, **luck):
    cfg = base_config()
    cfg["panel"] = ["loop"]
    cfg["luck"]["known_answer"] = {**cfg["luck"]["known_answer"], "enabled": False}  # no planted entry here
    cfg["luck"].update(luck)
    models = models or registry()
    return LuckWorkflow(cfg, models, lambda m: {"identity": models[m].identity, "params": dict(models[m].params),
                                               "structured_output": models[m].structured_output})


@pytest.fixture
def study(tmp_path: Path):
    prompts = tmp_path / "prompts"
    shutil.copytree(REPO / "config/prompts/luck", prompts)
    worlds = tmp_path / "worlds.parquet"
    entry.make_worlds(seed=3, domains=1, per_domain=4, margin=0.10, out=str(worlds))
    return tmp_path, worlds, prompts, tmp_path / "freeze" / "registered.json"


def _freeze(worlds, prompts, slice_, reg, out):
    return entry.freeze(worlds=str(worlds), prompts_dir=str(prompts), config_slice=slice_, registered=str(reg),
                        out=str(out))


def _verify(worlds, prompts, slice_, reg):
    entry.verify_freeze(worlds=str(worlds), prompts_dir=str(prompts), config_slice=slice_, registered=str(reg))


def test_first_freeze_registers_then_verifies(study):
    tmp, worlds, prompts, reg = study
    m = _freeze(worlds, prompts, SLICE, reg, tmp / "manifest.json")
    assert reg.exists() and m["registered"]["digest"] == manifest_digest(m)
    assert set(m["prompt_files"]) >= {"writer_rb_failure.md", "reader_user.txt"}
    assert m["rendered_prompts"]["writer"]["requests"] == 4 * 12
    assert m["rendered_prompts"]["reader"]["requests"] == 4 * 12
    again = _freeze(worlds, prompts, SLICE, reg, tmp / "manifest.json")
    assert again == m  # the registered manifest is kept, not rewritten
    _verify(worlds, prompts, SLICE, reg)


def test_code_covers_every_study_module_and_the_request_layer():
    from memtrials.studies.luck.codeset import AFTER_THE_FACT

    luck = {f"src/memtrials/studies/luck/{p.name}" for p in (REPO / "src/memtrials/studies/luck").glob("*.py")}
    after = {f"src/memtrials/studies/luck/{name}" for name in AFTER_THE_FACT}
    assert after == {"src/memtrials/studies/luck/headline.py"}
    assert not after & set(CODE_FILES)  # the scorecard's reading of the registered analysis is not protocol
    known = {f"src/memtrials/studies/luck/{n}" for n in KNOWN_ANSWER}  # the known-answer run: not the protocol
    assert luck - after - known <= set(CODE_FILES) and not known & set(CODE_FILES)
    assert luck - after <= set(known_files())
    for f in ("tables.py", "examples.py", "entry.py", "figure.py", "analysis.py"):
        assert f"src/memtrials/studies/luck/{f}" in CODE_FILES
    for f in ("llm/client.py", "llm/structured.py", "llm/cache/keys.py", "stats/intervals.py", "stats/betting.py",
              "stats/multiplicity.py", "report/tables.py", "config/prompts.py"):
        assert f"src/memtrials/{f}" in CODE_FILES
    # followed through the package's re-exports (memtrials.stats: its lazy _WHERE map) to the defining modules only
    assert "src/memtrials/stats/paired.py" not in CODE_FILES
    assert "src/memtrials/cells.py" not in CODE_FILES


def test_a_changed_code_file_is_refused(study):
    tmp, worlds, prompts, reg = study
    _freeze(worlds, prompts, SLICE, reg, tmp / "manifest.json")
    doc = json.loads(reg.read_text())
    doc["code"]["src/memtrials/studies/luck/tables.py"] = "0" * 64  # as if tables.py had changed since
    reg.write_text(json.dumps(doc))
    with pytest.raises(FreezeMismatch, match=r"code\.src/memtrials/studies/luck/tables\.py"):
        _verify(worlds, prompts, SLICE, reg)


@pytest.mark.parametrize("change,expect", [
    ({"model": "org/model-b"}, "identity.model"),
    ({"extra_body": {"provider": {"order": ["B"], "allow_fallbacks": False}}}, "extra_body.provider.order"),
    ({"params": {"temperature": 0.7, "max_tokens": 64}}, "sent.writer.params.temperature"),
])
def test_endpoint_id_pin_and_sent_params_are_frozen(study, change, expect):
    tmp, worlds, prompts, reg = study
    _freeze(worlds, prompts, workflow().slice(), reg, tmp / "manifest.json")
    with pytest.raises(FreezeMismatch, match=expect.replace(".", r"\.")):
        _verify(worlds, prompts, workflow(registry(**change)).slice(), reg)


def test_sent_params_are_the_entry_with_the_study_override():
    sl = workflow(writer={"max_tokens": 16}, reader={"max_tokens": None}).slice()
    sent = sl["endpoints"]["loop"]["sent"]
    assert sent["writer"]["params"] == {"temperature": 0.0, "max_tokens": 16}
    assert sent["reader"]["params"] == {"temperature": 0.0, "max_tokens": 64}  # null: the entry's own
    assert sent["reader"]["extra_body"] == {"provider": {"order": ["A"], "allow_fallbacks": False}}
    assert sl["endpoints"]["loop"]["identity"]["model"] == "org/model-a"


def test_schema_text_for_endpoints_without_structured_output_is_frozen(study):
    tmp, worlds, prompts, reg = study
    ps = PromptSet.load(prompts)
    from memtrials.studies.luck.entry import load_worlds

    ws = load_worlds(str(worlds))
    structured = build_manifest(worlds, ws, ps, workflow().slice())["rendered_prompts"]
    plain = build_manifest(worlds, ws, ps, workflow(registry(structured_output=False)).slice())["rendered_prompts"]
    assert set(structured) == {"writer", "reader"} and set(plain) == {"writer", "reader[schema in prompt]"}
    assert plain["writer"] == structured["writer"]
    assert plain["reader[schema in prompt]"]["sha256"] != structured["reader"]["sha256"]


@pytest.mark.parametrize("change,expect", [
    ("prompt", "prompt_files.memory_planted.txt"),
    ("config", "config.slice.luck.seed"),
    ("worlds", "worlds.content_sha256"),
])
def test_drift_is_refused_with_what_changed(study, change, expect):
    tmp, worlds, prompts, reg = study
    _freeze(worlds, prompts, SLICE, reg, tmp / "manifest.json")
    slice_ = SLICE
    if change == "prompt":
        f = prompts / "memory_planted.txt"
        f.write_text(f.read_text().replace("every run", "each run"))
    elif change == "config":
        slice_ = {**SLICE, "luck": {"seed": 4}}
    else:
        entry.make_worlds(seed=4, domains=1, per_domain=4, margin=0.10, out=str(worlds))
    with pytest.raises(FreezeMismatch) as err:
        _verify(worlds, prompts, slice_, reg)
    msg = str(err.value)
    assert expect in msg and "--refreeze" in msg and str(reg) in msg
    # the writer and reader cells and the analysis refuse before opening any client or reading records
    common = dict(worlds=str(worlds), prompts_dir=str(prompts), config_slice=slice_, registered=str(reg))
    with pytest.raises(FreezeMismatch):
        asyncio.run(entry.writers(config={}, model="loop", max_tokens=8, out=str(tmp / "l.parquet"),
                                  calls=str(tmp / "c.parquet"), **common))
    with pytest.raises(FreezeMismatch):
        asyncio.run(entry.readers(config={}, model="loop", lessons=str(tmp / "l.parquet"), max_tokens=8,
                                  out=str(tmp / "a.parquet"), calls=str(tmp / "c.parquet"), **common))
    with pytest.raises(FreezeMismatch):
        entry.analysis(answers=[str(tmp / "a.parquet")], lessons=[str(tmp / "l.parquet")], rules={},
                       outdir=str(tmp / "analysis"), **common)
    assert not (tmp / "l.parquet").exists() and not (tmp / "analysis").exists()
    # re-freeze on purpose: the old registration is kept beside, the next freeze registers anew
    assert main(["--refreeze", str(reg)]) == 0
    assert not reg.exists() and len(list(reg.parent.glob("registered.*.json"))) == 1
    m = _freeze(worlds, prompts, slice_, reg, tmp / "manifest.json")
    _verify(worlds, prompts, slice_, reg)
    assert json.loads(reg.read_text())["registered"]["digest"] == m["registered"]["digest"]


def test_cells_need_a_registered_freeze(study):
    tmp, worlds, prompts, reg = study
    with pytest.raises(FreezeMismatch, match="no registered freeze"):
        _verify(worlds, prompts, SLICE, reg)


def test_corrupt_registration_is_named(study):
    tmp, worlds, prompts, reg = study
    reg.parent.mkdir(parents=True)
    reg.write_text("{not json")
    with pytest.raises(FreezeMismatch, match="not valid JSON"):
        _verify(worlds, prompts, SLICE, reg)


def test_lock_is_not_part_of_the_manifest(study):
    tmp, worlds, prompts, reg = study
    m = _freeze(worlds, prompts, SLICE, reg, tmp / "manifest.json")
    doc = json.loads(reg.read_text())
    doc["lock"] = {"at": "now", "records": {"x": "y"}}
    reg.write_text(json.dumps(doc))
    assert register_or_verify({k: v for k, v in m.items() if k != "registered"}, reg)["lock"]["records"] == {"x": "y"}
