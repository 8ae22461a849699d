"""Data roots for the playbook tests: a small authored AppWorld set (building one takes a
minute) with one shared AppWorld engine, and a few generated ALFWorld games."""

from __future__ import annotations

import pytest

from tests.playbook.helpers import SharedEnv, build_alfworld, build_appworld


@pytest.fixture(scope="session")
def aw_root(tmp_path_factory):
    return build_appworld(tmp_path_factory.mktemp("playbook-appworld") / "root")


@pytest.fixture(scope="session")
def aw_env(aw_root):
    """One AppWorld engine (its child process) for every in-process AppWorld job of the session
    (``make_env`` of :func:`tests.playbook.helpers.run_part`); the actor's one action is its step cap."""
    from memtrials.envs.make import make_env

    shared = SharedEnv(make_env("appworld", root=str(aw_root), max_steps=1))
    yield lambda: shared
    shared.shut()


@pytest.fixture(scope="session")
def alf_root(tmp_path_factory):
    return build_alfworld(tmp_path_factory.mktemp("playbook-alfworld") / "games")
