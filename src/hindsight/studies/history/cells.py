"""Old path of :mod:`hindsight.studies.history.entry`, kept only until the runner's files switch."""

from hindsight.studies.history.entry import continuation, probe, rollouts  # noqa: F401
