"""``<study>.actor.listing``: one default in config.yaml, required in the schema with the same
default, refused when unknown (the message names the key), and carried into ActorSettings."""

from __future__ import annotations

import copy
import json
import os

import pytest
import yaml

from memtrials.config import ConfigError, check_config
from memtrials.studies.antipersist.design import actor_settings as antipersist_actor
from memtrials.studies.history.design import actor_settings as history_actor
from memtrials.studies.playbook.design import actor_settings as playbook_actor
from tests.conftest import REPO, base_config

SECTIONS = ("history", "playbook", "antipersist")


@pytest.mark.parametrize("section", SECTIONS)
def test_the_key_is_required_with_the_configs_default(section):
    schema = json.loads((REPO / "config/schemas/config.schema.json").read_text())
    actor = schema["properties"][section]["properties"]["actor"]
    assert "listing" in actor["required"]
    assert actor["properties"]["listing"]["enum"] == ["sample", "ranked", "best-first"]
    assert actor["properties"]["listing"]["default"] == base_config()[section]["actor"]["listing"]


@pytest.mark.parametrize("section", SECTIONS)
def test_an_unknown_or_missing_listing_names_the_key(section):
    os.chdir(REPO)
    cfg = base_config()
    cfg[section]["actor"]["listing"] = "best"
    with pytest.raises(ConfigError, match=rf"key {section}\.actor\.listing"):
        check_config(cfg, "config/config.yaml")
    cfg = base_config()
    del cfg[section]["actor"]["listing"]
    with pytest.raises(ConfigError, match="'listing' is a required property"):
        check_config(cfg, "config/config.yaml")


def test_each_study_passes_the_listing_to_its_actor():
    cfg = base_config()
    for listing in ("sample", "ranked", "best-first"):
        assert history_actor("m", "raw", dict(cfg["history"]["actor"], listing=listing)).listing == listing
        assert playbook_actor("m", dict(cfg["playbook"]["actor"], listing=listing)).listing == listing
        assert antipersist_actor("m", dict(cfg["antipersist"]["actor"], listing=listing)).listing == listing


def merge(base: dict, over: dict) -> dict:
    """``over`` onto ``base`` key by key, as snakemake's --configfile does."""
    for k, v in over.items():
        base[k] = merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


@pytest.mark.parametrize("preset", ["history-paper", "playbook-paper", "antipersist-paper"])
def test_the_paper_presets_list_every_action(preset):
    doc = yaml.safe_load((REPO / "config/presets" / f"{preset}.yaml").read_text())
    merged = merge(copy.deepcopy(base_config()), doc)
    section = next(s for s in SECTIONS if s in doc)
    assert merged[section]["actor"]["max_listed_actions"] is None
    os.chdir(REPO)
    check_config(merged, f"config/presets/{preset}.yaml")
