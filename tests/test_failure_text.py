"""The test helper that shows a failed Snakemake run's tracebacks (tests.conftest.failure_text)."""

from __future__ import annotations

import subprocess

from tests.conftest import failure_text


def test_a_traceback_far_above_the_end_is_shown():
    err = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    1 / 0\n"
           "ZeroDivisionError: division by zero\n" + "INFO other job: a line\n" * 500
           + "Error in rule calibrator_joint_sources:\n    jobid: 3\n    log: logs/x.log\n\nShutting down\n")
    text = failure_text(subprocess.CompletedProcess([], 1, "", err), tail=200)
    assert "ZeroDivisionError: division by zero" in text and "1 / 0" in text
    assert "Error in rule calibrator_joint_sources:" in text and "log: logs/x.log" in text
    assert text.endswith(err[-200:])


def test_no_traceback_leaves_the_tail():
    assert failure_text(subprocess.CompletedProcess([], 1, "out\n", "err\n")) == "out\nerr\n"
