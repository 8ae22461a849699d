"""LuckWorkflow: the luck section resolved for luck.smk, with no default outside
config/config.yaml (every key required by the schema)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from memtrials.config import ConfigError, check_config, load_schema, parse_models
from memtrials.studies.luck.workflow import LuckWorkflow
from tests.conftest import base_config
from tests.luck.test_luck_freeze import registry, workflow

REPO = Path(__file__).resolve().parents[2]
MODELS_RAW = yaml.safe_load((REPO / "config/models.yaml").read_text())


def test_every_luck_key_is_required_by_the_schema():
    schema = load_schema("config.schema.json")
    luck = base_config()["luck"]

    def paths(d, prefix=()):
        for k, v in d.items():
            yield prefix + (k,)
            if isinstance(v, dict):
                yield from paths(v, prefix + (k,))

    for path in paths(luck):
        cfg = base_config()
        node = cfg["luck"]
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
        with pytest.raises(jsonschema.ValidationError, match=re.escape(f"'{path[-1]}' is a required property")):
            jsonschema.validate(cfg, schema)


def test_schema_documents_config_yaml_as_the_default():
    """The same rule as tests/test_config_defaults.py for the luck section."""
    schema = load_schema("config.schema.json")
    assert "luck" in schema["required"]

    def walk(node, value, path):
        if isinstance(value, dict) and "properties" in node:
            assert set(node["required"]) >= set(value), path
            for k, v in value.items():
                walk(node["properties"][k], v, f"{path}.{k}")
        else:
            assert "default" in node and node["default"] == value, f"{path}: schema default differs"

    walk(schema["properties"]["luck"], base_config()["luck"], "luck")


def test_no_second_default_in_code_or_rules():
    smk = (REPO / "workflow/rules/luck.smk").read_text()
    assert "LUCK.get(" not in smk and ".get(" not in smk
    assert "20261009" not in smk and "20261130" not in smk
    for f in (REPO / "src/memtrials/studies/luck").glob("*.py"):
        text = f.read_text()
        assert not re.search(r"\b2026(1009|1130)\b", text), f.name  # a seed as a default
    assert "luck" not in (REPO / "workflow/rules/common.smk").read_text().lower()


def test_workflow_reads_the_config():
    lw = workflow(seed=11, worlds={"domains": 2, "per_domain": 8, "margin": 0.12})
    assert lw.worlds() == {"seed": 11, "domains": 2, "per_domain": 8, "margin": 0.12}
    assert lw.panel == ["loop"] and lw.enabled and lw.api("loop") == 2
    assert "results/luck/tables/table1_panel.md" in lw.final_targets()
    assert "results/luck/figures/figure1_p2_p3m.svg" in lw.final_targets()
    assert lw.code("report") == lw.code("writers") and "src/memtrials/studies/luck/tables.py" in lw.code("report")
    assert workflow(enabled=False).final_targets() == []
    with pytest.raises(ValueError, match="unknown luck workflow part"):
        lw.code("nope")
    assert "src/memtrials/studies/luck/planted.py" in lw.code("known")


def test_known_answer_run_is_configured_and_outside_the_freeze():
    cfg = base_config()
    models = check_config(cfg)
    lw = LuckWorkflow(cfg, models, lambda m: {"identity": models[m].identity, "params": dict(models[m].params),
                                            "structured_output": models[m].structured_output})
    assert "results/luck/tables/known_answer.md" in lw.final_targets()
    k = lw.known_cell()
    assert k["cell"]["endpoint"] == "planted-luck" and k["params"] == dict(models["planted-luck"].planted.params)
    assert "known_answer" not in lw.slice()["luck"]  # the registered protocol does not see it
    cfg["luck"]["known_answer"]["endpoint"] = "smollm2"
    with pytest.raises(ConfigError, match="luck.known_answer.endpoint: 'smollm2' is not a planted entry"):
        LuckWorkflow(cfg, models, lambda m: {})
    cfg["luck"]["known_answer"].update(endpoint="planted-luck")
    bad = copy.deepcopy(MODELS_RAW)
    del bad["endpoints"]["planted-luck"]["planted"]["params"]["reader"]["directive"]
    with pytest.raises(ConfigError, match=r"planted-luck\.planted\.params\.reader\.directive"):
        LuckWorkflow(cfg, parse_models(bad, "config/models.yaml"), lambda m: {})


def test_config_errors_are_named():
    with pytest.raises(ConfigError, match="endpoint 'ghost' is not in"):
        workflow(panel=["ghost"])
    cfg = base_config()
    del cfg["luck"]
    with pytest.raises(ConfigError, match="config key luck: missing"):
        LuckWorkflow(cfg, registry(), lambda m: {})


def test_scripts_pass_keywords():
    for f in (REPO / "workflow/scripts").glob("luck_*.py"):
        text = f.read_text()
        for call in re.findall(r"run\.\w+\((.*?)\)\)", text, re.S):
            assert "=" in call or "**" in call, (f.name, call)
        assert not re.search(r"run\.\w+\(s\.", text), f.name  # no positional snakemake.* arguments
