"""Malformed registries and configs fail with a message naming the file, the key and the fix."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from memtrials.config import (
    ConfigError, check_config, check_config_files, load_config, load_models, load_yaml, parse_models,
)
from tests.conftest import REPO, base_config

GOOD = {
    "endpoints": {
        "m": {
            "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x", "api_key_env": "SOME_KEY",
            "max_concurrency": 4, "params": {"temperature": 0.0, "max_tokens": 16, "seed": 0},
            "structured_output": False, "price": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
        }
    }
}


def edited(doc, path: str, value=None, delete: bool = False):
    """A deep copy of ``doc`` with the dotted key ``path`` set to ``value`` (or deleted)."""
    doc = copy.deepcopy(doc)
    node = doc
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    if delete:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return doc


def variant(path: str, value, delete: bool = False):
    return edited(GOOD, path, value, delete)


MODEL_CASES = [
    (variant("endpoints.m.bas_url", "http://x/v1"), r"endpoints\.m.*unknown key.*'bas_url'"),
    (variant("endpoints.m.model", None, delete=True), r"endpoints\.m.*'model' is a required property"),
    (variant("endpoints.m.max_concurrency", 0), r"endpoints\.m\.max_concurrency"),
    (variant("endpoints.m.max_concurrency", "eight"), r"endpoints\.m\.max_concurrency"),
    (variant("endpoints.m.provider", "anthropic"), r"endpoints\.m\.provider"),
    (variant("endpoints.m.base_url", "127.0.0.1:8000"), r"endpoints\.m\.base_url"),
    (variant("endpoints.m.base_url", None, delete=True), r"endpoint 'm': key base_url is missing. Fix"),
    (variant("endpoints.m.api_key_env", "sk-abc123"), r"endpoints\.m\.api_key_env"),
    (variant("endpoints.m.params.temperature", 5), r"endpoints\.m\.params\.temperature"),
    # no sampling parameter is required (an entry may send none), but a misspelt one is refused
    (variant("endpoints.m.params.temprature", 0.5), r"endpoints\.m\.params.*unknown key.*'temprature'"),
    (variant("endpoints.m.price", {"input_per_mtok": 1.0}), r"endpoints\.m\.price.*'output_per_mtok'"),
    (variant("endpoints.m.rpm", -5), r"endpoints\.m\.rpm"),
    (variant("endpoints.m.provider", "embedded"), r"endpoint 'm': key embedded is missing"),
    ({"endpoint": GOOD["endpoints"]}, r"unknown key.*'endpoint'"),
    ({"endpoints": {"bad name!": GOOD["endpoints"]["m"]}}, r"endpoints.*'bad name!'"),
]


@pytest.mark.parametrize("doc,pattern", MODEL_CASES)
def test_bad_registry_names_file_and_key(doc, pattern):
    with pytest.raises(ConfigError, match=pattern) as info:
        parse_models(doc, "config/models.yaml")
    assert str(info.value).startswith("config/models.yaml")


def cfg_variant(path: str, value, delete: bool = False):
    return edited(base_config(), path, value, delete)


CONFIG_CASES = [
    (cfg_variant("panel", ["no-such-model"]), r"key panel: model 'no-such-model' is not in"),
    (cfg_variant("panel", []), r"key panel"),
    (cfg_variant("cache.mode", "sometimes"), r"key cache\.mode"),
    (cfg_variant("budget.max_usd_per_run", -1), r"key budget\.max_usd_per_run"),
    (cfg_variant("request.timeout_s", 0), r"key request\.timeout_s"),
    (cfg_variant("panle", ["smollm2"]), r"unknown key.*'panle'"),
    (cfg_variant("models_file", None, delete=True), r"'models_file' is a required property"),
    (cfg_variant("roles", {"judge": "ghost"}), r"key roles: model 'ghost' is not in"),
    (cfg_variant("smoke.question", ""), r"key smoke\.question"),
    # numbers out of range: rejected by the schema before any job, not inside one (hostile review, 4 Dec)
    (cfg_variant("playbook.measurement.level", 1.5), r"key playbook\.measurement\.level: 1\.5 is greater"),
    (cfg_variant("playbook.growth.merge_threshold", 3), r"key playbook\.growth\.merge_threshold"),
    (cfg_variant("playbook.growth.token_budget", -5), r"key playbook\.growth\.token_budget"),
    (cfg_variant("playbook.actor.max_output_tokens", 0), r"key playbook\.actor\.max_output_tokens"),
    (cfg_variant("playbook.actor.max_listed_actions", 0), r"key playbook\.actor\.max_listed_actions"),
    (cfg_variant("antipersist.actor.max_listed_actions", 0), r"key antipersist\.actor\.max_listed_actions"),
    (cfg_variant("antipersist.synthesis.max_tokens", 0), r"key antipersist\.synthesis\.max_tokens"),
    (cfg_variant("calibrator.train.batch_size", 0), r"key calibrator\.train\.batch_size"),
    (cfg_variant("calibrator.train.grad_accum", 0), r"key calibrator\.train\.grad_accum"),
    (cfg_variant("calibrator.review_max_tokens", 0), r"key calibrator\.review_max_tokens"),
    (cfg_variant("history.seed", -1), r"key history\.seed"),
    (cfg_variant("cache.path", "/etc/hostname/llm.sqlite"), r"key cache\.path: the cache's folder cannot be "
                                                             r"written at /etc/hostname: .* is a file"),
    (cfg_variant("cache.path", "/proc/memtrials-no-such/llm.sqlite"), r"key cache\.path: .*/proc is not writable"),
    (cfg_variant("cache.path", "tests"), r"key cache\.path: tests is a folder"),
]


@pytest.mark.parametrize("cfg,pattern", CONFIG_CASES)
def test_bad_config_names_key(cfg, pattern):
    os.chdir(REPO)
    with pytest.raises(ConfigError, match=pattern):
        check_config(cfg, "config/config.yaml")


def test_yaml_syntax_error_names_file(tmp_path):
    bad = tmp_path / "models.yaml"
    bad.write_text("endpoints:\n  m: {provider: openai\n")
    with pytest.raises(ConfigError, match=r"models\.yaml: not valid YAML"):
        load_models(bad)


def test_missing_models_file(tmp_path):
    cfg = base_config()
    cfg["models_file"] = str(tmp_path / "absent.yaml")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"absent\.yaml: file not found"):
        load_config(path)


def test_unset_key_variable_names_variable_and_fix(monkeypatch):
    monkeypatch.delenv("SOME_KEY", raising=False)
    ep = parse_models(GOOD)["m"]
    with pytest.raises(ConfigError, match=r"endpoint 'm'.*SOME_KEY, which is not set\. Fix: export SOME_KEY="):
        ep.api_key()


def test_default_files_are_valid():
    os.chdir(REPO)
    load_config(REPO / "config" / "config.yaml")
    for preset in (REPO / "config" / "presets").glob("*.yaml"):
        if preset.name.endswith(".models.yaml"):
            load_models(preset)


# -- a key pasted where the NAME of its variable belongs ------------------------------
PASTED = [
    "sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7",            # fails the schema's name pattern
    "hf_abcdefghijklmnopqrstuvwxyz0123456789",     # lower case: fails the pattern
    "HF_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",     # upper-cased: passes the pattern
    "GSK_8F3K2L9Q0W1E2R3T4Y5U6I7O8P9A0S1D2F3G4H",
    "AIZASYD8X9C7V6B5N4M3L2K1J0H9G8F7E6D5C4B",
    "AKIAIOSFODNN7EXAMPLE",
    "JPCK5Y50UBNV0IRGEG6XQSSWK1VJQCGR",            # no known prefix: a long random token
]


@pytest.mark.parametrize("value", PASTED)
def test_a_pasted_key_is_rejected_and_never_echoed(value, tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(variant("endpoints.m.api_key_env", value)))
    with pytest.raises(ConfigError) as info:
        load_models(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "endpoints.m.api_key_env" in message
    assert value not in message and value.lower() not in message.lower()
    assert "NAME of an environment variable" in message and "export OPENAI_API_KEY=<the key>" in message
    assert f"export {value}" not in message


def test_a_pasted_key_is_not_echoed_by_other_errors_of_the_same_entry():
    value = "sk-live-0123456789abcdefghij"
    doc = variant("endpoints.m.api_key_env", value)
    doc["endpoints"]["m"]["max_concurrency"] = "eight"
    doc["endpoints"]["m"]["extra"] = {"note": value}
    with pytest.raises(ConfigError) as info:
        parse_models(doc, "config/models.yaml")
    assert value not in str(info.value) and "max_concurrency" in str(info.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "HF_TOKEN", "HF_HOME_TOKEN_FOR_CI",
                                  "MY_COMPANY_INTERNAL_LLM_GATEWAY_API_KEY", "LLAMA3_70B_KEY"])
def test_variable_names_pass(name):
    assert parse_models(variant("endpoints.m.api_key_env", name))["m"].api_key_env == name


# -- YAML files: duplicate keys, folders, syntax, empty overlays ---------------------
def test_duplicate_endpoint_names_are_rejected_with_file_line_and_key(tmp_path):
    path = tmp_path / "models.yaml"
    entry = yaml.safe_dump(GOOD["endpoints"]["m"], default_flow_style=True, width=10**6).strip()
    path.write_text(f"endpoints:\n  m: {entry}\n  other: {entry}\n  m: {entry}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: line 4, column 3: key 'm' appears twice .*first at line 2.*Fix"):
        load_models(path)


BAD_OVERLAYS = {  # an overlay's text -> what loading it says after its name ({path}: the file), what checking it says
    "duplicate key": ("smoke:\n  enabled: false\n  enabled: true\n",
                      r"line 3, column 3: key 'enabled' appears twice", r"key 'enabled' appears twice"),
    "empty": ("# nothing yet\n", r"the file is empty.*Fix: .*drop --configfile {path}", r"the file is empty"),
}


@pytest.mark.parametrize("text,loaded,checked", BAD_OVERLAYS.values(), ids=BAD_OVERLAYS)
def test_a_bad_config_overlay_is_rejected_with_its_name(tmp_path, text, loaded, checked):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{overlay}: " + loaded.format(path=overlay)):
        load_config(REPO / "config" / "config.yaml", [overlay])
    with pytest.raises(ConfigError, match=checked):
        check_config_files([REPO / "config" / "config.yaml", overlay])


def test_models_file_that_is_a_folder(tmp_path):
    cfg = base_config()
    cfg["models_file"] = str(tmp_path)
    with pytest.raises(ConfigError, match=rf"^{tmp_path}: is a folder, not a YAML file .*model registry.*Fix: name "
                                          rf"the file itself"):
        check_config(cfg)


def test_yaml_syntax_error_names_file_line_and_column(tmp_path):
    bad = tmp_path / "overlay.yaml"
    bad.write_text("panel: [smollm2\nsmoke:\n  enabled: true\n")
    with pytest.raises(ConfigError, match=rf"^{bad}: not valid YAML at line \d+, column \d+: .*Fix: correct"):
        load_config(REPO / "config" / "config.yaml", [bad])


def test_default_config_files_have_no_duplicate_keys():
    check_config_files([REPO / "config" / "config.yaml",
                        *(p for p in (REPO / "config" / "presets").glob("*.yaml") if not p.name.endswith(".models.yaml"))])
    for path in (REPO / "config").rglob("*.yaml"):
        load_yaml(path)


def test_config_check_command_names_the_overlay_snakemake_would_not(tmp_path, capsys, monkeypatch):
    from memtrials.__main__ import main

    monkeypatch.chdir(REPO)
    empty, bad = tmp_path / "empty.yaml", tmp_path / "bad.yaml"
    empty.write_text("")
    bad.write_text("panel: [smollm2\n")
    assert main(["config", "check", "--configfile", str(empty)]) == 2
    assert f"error: {empty}: the file is empty" in capsys.readouterr().err
    assert main(["config", "check", "--configfile", str(bad)]) == 2
    assert f"error: {bad}: not valid YAML at line 2, column 1" in capsys.readouterr().err
    assert main(["config", "check", "--configfile", "config/presets/luck-paper.yaml"]) == 0


def test_json_config_files_are_checked_too(tmp_path):
    dup, bad, good = tmp_path / "dup.json", tmp_path / "bad.json", tmp_path / "good.json"
    dup.write_text('{"smoke": {"enabled": false},\n\t"smoke": {"enabled": true}}')
    bad.write_text('{"smoke": {"enabled": false}')
    good.write_text('{\n\t"smoke": {"enabled": false}\n}')  # a tab: valid JSON, not valid YAML 1.1
    with pytest.raises(ConfigError, match=rf"^{dup}: key 'smoke' appears twice"):
        check_config_files([dup])
    with pytest.raises(ConfigError, match=rf"^{bad}: not valid JSON at line 1, column \d+"):
        check_config_files([bad])
    check_config_files([good])


def _unbounded(node, path=()):
    """Dotted paths of the number and integer keys of a JSON schema that have no lower bound."""
    if not isinstance(node, dict):
        return []
    found = []
    kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if {"integer", "number"} & set(kinds) and not {"minimum", "exclusiveMinimum", "enum"} & set(node):
        found.append(".".join(path))
    for key, value in node.items():
        if isinstance(value, dict):
            found += _unbounded(value, (*path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                found += _unbounded(item, (*path, f"{key}[{i}]"))
    return found


# numbers whose range a study's own check enforces before any job, with the reason in its message
# (e.g. "0 is not a decay"), so the schema leaves them open: each with a value out of range
STUDY_CHECKED = {
    "playbook.measurement.p": 1.0, "playbook.measurement.budget": 0, "playbook.baselines.cut_share": 1.7,
    "playbook.baselines.merge_threshold": 5, "antipersist.selector.lam": -1, "antipersist.selector.gamma": 0,
    "antipersist.selector.epsilon": 1.5, "antipersist.selector.bonus": -1, "antipersist.selector.min_cosine": 2,
    "antipersist.sweeps.gamma": [2], "antipersist.sweeps.lambda": [-1],
}


def _schema_path(dotted: str) -> str:
    """``a.b`` -> the walk's path of that key in the config schema (``items`` for a list's numbers)."""
    path = "properties." + ".properties.".join(dotted.split("."))
    return path + (".items" if dotted.startswith("antipersist.sweeps.") else "")


@pytest.mark.parametrize("schema", ["config.schema.json", "models.schema.json"])
def test_every_number_in_the_schemas_has_a_lower_bound(schema):
    """A count, a token cap, a seed or a share with no bound let 0 or -1 through the check and fail
    (or silently do nothing) inside a job; each has its range in the schema, where the message
    names the key, or in a study's own check (STUDY_CHECKED, tested below)."""
    import json

    doc = json.loads((REPO / "config" / "schemas" / schema).read_text())
    allowed = {_schema_path(k) for k in STUDY_CHECKED} if schema == "config.schema.json" else set()
    assert sorted(set(_unbounded(doc)) - allowed) == []


@pytest.mark.parametrize("key", sorted(STUDY_CHECKED))
def test_numbers_left_to_a_studys_check_are_refused_before_any_job(key, tmp_path, capsys, monkeypatch):
    from memtrials.__main__ import main

    monkeypatch.chdir(REPO)
    head, *rest = key.split(".")
    doc: dict = {}
    node = doc.setdefault(head, {})
    for part in rest[:-1]:
        node = node.setdefault(part, {})
    node[rest[-1]] = STUDY_CHECKED[key]
    overlay = tmp_path / "bad.yaml"
    overlay.write_text(yaml.safe_dump(doc))
    assert main(["config", "check", "--configfile", str(overlay)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {overlay}: ") and key in err, err


def test_a_negative_seed_in_the_registry_is_refused():
    """llama.cpp reads seed -1 as a fresh random seed: a rerun would not repeat its replies."""
    with pytest.raises(ConfigError, match=r"endpoints\.m\.params\.seed"):
        parse_models(variant("endpoints.m.params.seed", -1), "config/models.yaml")


def test_the_cache_path_check_leaves_nothing_behind(tmp_path):
    """The write check makes and removes a folder: a config check creates no lasting file."""
    os.chdir(REPO)
    cfg = cfg_variant("cache.path", str(tmp_path / "new" / "cache" / "llm.sqlite"))
    check_config(cfg, "config/config.yaml")
    assert list(tmp_path.iterdir()) == []


def test_a_number_from_snakemakes_command_line_is_explained():
    """``--config 'history={tasks_per_cell: 2}'``: Snakemake reads the braces with YAML's base
    loader, so the value arrives as the string '2'; the refusal says why and what to do."""
    from memtrials.config import config_sources, merge

    os.chdir(REPO)
    cli = {"history": {"tasks_per_cell": "2"}, "smoke": {"enabled": "false"}}
    sources = config_sources(["config/config.yaml"], [], cli)
    with pytest.raises(ConfigError) as info:
        check_config(merge(base_config(), cli), sources)
    text = str(info.value)
    assert text.startswith("--config on the command line: invalid configuration")
    assert "key history.tasks_per_cell: '2' is not of type 'integer'" in text
    assert "as the string '2', not 2: set it in a --configfile overlay" in text
    assert "as the string 'false', not false" in text
    # the same value from an overlay file is a plain type error, with no word about --config
    with pytest.raises(ConfigError) as info:
        check_config(cfg_variant("history.tasks_per_cell", "2"), "config/config.yaml")
    assert "--config" not in str(info.value)
