"""The study interface and its registry (memtrials.pipeline.study, memtrials.studies): the five
built-in studies are registered with their rules file, entry points, config section and docs
page; every registered study is built by ``python -m memtrials config check`` (a toy study
registered here included, its check's message reported); importing the registry imports no
study."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

import memtrials.config.checks
import memtrials.config.schema
from memtrials import studies
from memtrials.__main__ import main
from memtrials.config import ConfigError, load_config, load_models
from memtrials.pipeline.codesets import module_file
from memtrials.pipeline.study import Study, alternatives
from tests.conftest import REPO

BUILT_IN = ["luck", "history", "calibrator", "playbook", "antipersist"]


def test_the_registry_lists_exactly_the_five_built_in_studies_each_with_its_files():
    assert studies.study_names() == BUILT_IN
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    for name, cls in zip(BUILT_IN, studies.study_classes()):
        assert issubclass(cls, Study) and cls.name == name
        assert (REPO / "workflow/rules" / f"{name}.smk").is_file(), name
        assert (REPO / "docs" / f"{name}.md").is_file(), name
        assert name in config, name
        assert module_file(f"{cls.package}.entry") is not None, f"{cls.package}.entry"
        assert cls.parts, name
        for part in cls.parts:
            files = cls.code(part)
            assert files and all((REPO / f).is_file() for f in files), (name, part)
        with pytest.raises(ValueError):
            cls.code("no-such-part")


def test_importing_the_registry_imports_no_study():
    code = ("import sys, memtrials.studies as s; s.study_names(); "
            "print([m for m in sys.modules if m.startswith('memtrials.studies.')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_study_refuses_a_config_without_its_section_with_one_message(name):
    config = {k: v for k, v in load_config(REPO / "config/config.yaml").items() if k != name}
    with pytest.raises(ConfigError) as err:
        studies.study_class(name)(config, {}, lambda m: {})
    assert str(err.value) == (f"config key {name}: missing; copy the {name} section of config/config.yaml "
                              "(every key is required)")


class Toy(Study):
    """A study defined here: its section ``toy`` has ``enabled`` and ``size``."""

    name = "toy"
    package = "tests"

    def resolve(self) -> None:
        self.size = self.section["size"]

    def check(self) -> None:
        if self.size < 1:
            raise ConfigError(f"config key toy.size: expected an integer >= 1, got {self.size!r}")

    def final_targets(self) -> list[str]:
        return ["results/toy/index.md"] if self.enabled else []


@pytest.fixture
def toy(monkeypatch):
    """Toy registered (on a copy of the registry) and a ``toy`` block in the config schema, as
    a fifth study adds one."""
    monkeypatch.setattr(studies, "STUDIES", dict(studies.STUDIES))
    studies.register("toy", Toy)
    original = memtrials.config.schema.load_schema

    def with_toy(name):
        schema = original(name)
        if name == "config.schema.json":
            schema["properties"]["toy"] = {"type": "object"}
        return schema

    monkeypatch.setattr(memtrials.config.checks, "load_schema", with_toy)  # where check_config reads it
    monkeypatch.chdir(REPO)
    return Toy


def test_config_check_runs_a_registered_studys_check(toy, tmp_path, capsys):
    overlay = tmp_path / "toy.yaml"
    overlay.write_text(yaml.safe_dump({"toy": {"enabled": True, "size": 0}}))
    assert main(["config", "check", "--configfile", str(overlay)]) == 2
    assert capsys.readouterr().err == f"error: {overlay}: config key toy.size: expected an integer >= 1, got 0\n"

    for section in ({"enabled": False, "size": 0}, {"enabled": True, "size": 3}):  # disabled: not checked
        overlay.write_text(yaml.safe_dump({"toy": section}))
        assert main(["config", "check", "--configfile", str(overlay)]) == 0
        assert capsys.readouterr().out == f"ok: config/config.yaml + {overlay}\n"

    assert main(["config", "check"]) == 2  # registered, but the config has no toy section
    assert "config key toy: missing; copy the toy section of config/config.yaml" in capsys.readouterr().err


def test_the_registry_builds_a_study_and_refuses_what_is_none(toy):
    config = {**load_config(REPO / "config/config.yaml"), "toy": {"enabled": True, "size": 2}}
    models = load_models(REPO / config["models_file"])
    built = studies.study_class("toy")(config, models, lambda m: {})
    assert built.enabled and built.final_targets() == ["results/toy/index.md"] and built.api("smollm2") >= 1
    assert studies.study_names()[-1] == "toy" and studies.study_classes()[-1] is Toy
    with pytest.raises(ValueError, match="already registered"):
        studies.register("luck", Toy)
    studies.register("named_wrong", "tests.test_studies_registry:Toy")  # a "module:Class" entry, resolved on use
    with pytest.raises(TypeError, match="whose name is 'named_wrong'"):
        studies.study_class("named_wrong")
    with pytest.raises(KeyError):
        studies.study_class("nowhere")


def test_config_check_builds_every_registered_study_in_order(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    built = []
    real = Study.__init__

    def spy(self, *args, **kwargs):
        built.append(self.name)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Study, "__init__", spy)
    assert main(["config", "check"]) == 0, capsys.readouterr().err
    assert built == BUILT_IN


def test_alternatives_match_exactly_the_values():
    assert alternatives(["a-b", "c"]) == r"a\-b|c"
    assert alternatives(["v1.5-x"], escape="-.") == r"v1\.5\-x"
    assert alternatives([]) == "NONE"
