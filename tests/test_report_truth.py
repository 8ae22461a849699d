"""Truth beside estimate (memtrials.report.truth): the join, coverage, and its refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memtrials.report.truth import COVERED, TRUTH, coverage, coverage_line, truth_beside


def _est() -> pd.DataFrame:
    return pd.DataFrame({"view": ["raw", "causal", "shuffled"], "model": "p",
                         "estimate": [0.5, 0.7, 0.3], "lo": [0.4, 0.6, 0.25], "hi": [0.6, 0.8, 0.35]})


def test_truth_joins_on_keys_and_marks_coverage():
    truth = pd.DataFrame({"view": ["shuffled", "raw", "causal"], "truth": [0.4, 0.5, 0.75]})
    out = truth_beside(_est(), truth, ["view"])
    assert list(out[TRUTH]) == [0.5, 0.75, 0.4] and list(out[COVERED]) == [True, True, False]
    c = coverage(out)
    assert c["cells"] == 3 and c["covered"] == 2 and c["rate"] == pytest.approx(2 / 3)
    assert c["bias"] == pytest.approx(((0.5 - 0.5) + (0.7 - 0.75) + (0.3 - 0.4)) / 3)
    assert "2 of 3 cells" in coverage_line(out)


def test_a_missing_or_doubled_truth_is_an_error_not_a_blank():
    with pytest.raises(ValueError, match="no planted truth .*shuffled"):
        truth_beside(_est(), pd.DataFrame({"view": ["raw", "causal"], "truth": [0.5, 0.7]}), ["view"])
    with pytest.raises(ValueError, match="two rows"):
        truth_beside(_est(), pd.DataFrame({"view": ["raw", "raw", "causal", "shuffled"], "truth": [0.5] * 4}), ["view"])
    with pytest.raises(ValueError, match="lacks column"):
        truth_beside(_est().drop(columns="lo"), pd.DataFrame({"view": ["raw"], "truth": [0.5]}), ["view"])


def test_wilson_intervals_of_simulated_rates_cover_at_the_nominal_rate():
    """A check of the helper with a known answer: Wilson 95 % intervals of binomial draws
    around planted rates hold the rate in about 95 % of cells."""
    from memtrials.stats import wilson_interval

    rng = np.random.default_rng(0)
    rows, truth = [], []
    for i, p in enumerate(np.linspace(0.1, 0.9, 400)):
        k = int(rng.binomial(200, p))
        iv = wilson_interval(k, 200)
        rows.append({"cell": i, "estimate": k / 200, "lo": iv.lo, "hi": iv.hi})
        truth.append({"cell": i, "truth": p})
    c = coverage(truth_beside(pd.DataFrame(rows), pd.DataFrame(truth), ["cell"]))
    assert 0.92 <= c["rate"] <= 0.98 and abs(c["bias"]) < 0.01


def test_the_known_answer_section_gathers_tables_and_their_coverage(tmp_path):
    from memtrials.report.known_answer import gather
    from memtrials.report.tables import write_table

    truth = pd.DataFrame({"view": ["shuffled", "raw", "causal"], "truth": [0.4, 0.5, 0.75]})
    write_table(truth_beside(_est(), truth, ["view"]), tmp_path / "a" / "planted_views", caption="Views.")
    write_table(pd.DataFrame({"x": [1]}), tmp_path / "b" / "other", caption="No truth here.")
    entries = [{"study": "history", "stem": str(tmp_path / "a" / "planted_views")},
               {"study": "luck", "stem": str(tmp_path / "b" / "other")}]
    summary = gather(entries, tmp_path / "ka" / "index.md", tmp_path / "ka" / "index.html")
    assert summary.to_dict("records")[0] | {"coverage": None, "mean bias": None} == {
        "study": "history", "table": "planted_views", "cells": 3, "covered": 2, "coverage": None, "mean bias": None}
    text = (tmp_path / "ka" / "index.md").read_text()
    assert "# Known-answer runs" in text and "## history" in text and "## luck" in text and "Views." in text
    assert "<h2>Coverage</h2>" in (tmp_path / "ka" / "index.html").read_text()
    with pytest.raises(FileNotFoundError, match="was not written"):
        gather([{"study": "x", "stem": str(tmp_path / "none")}], tmp_path / "i.md", tmp_path / "i.html")
