"""One small AppWorld data root for the playbook tests (building one takes a minute)."""

from __future__ import annotations

import pytest

from tests.playbook.helpers import build_appworld


@pytest.fixture(scope="session")
def aw_root(tmp_path_factory):
    return build_appworld(tmp_path_factory.mktemp("playbook-appworld") / "root")
