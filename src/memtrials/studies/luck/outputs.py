"""Names of the luck study's output tables.

Kept apart from the modules that write them (which load pandas and scipy) because the
workflow reads these names while it parses, and every local job parses it again.
"""

from __future__ import annotations

PANEL = "panel"

REPORT_TABLES = ("table1_panel", "table2_rates", "table3_endpoints", "table4_remedy_rates",
                 "table5_remedies", "table6_endpoints", "table7_good", "table8_bad", "table_secondary",
                 "table_cell_rates", "table_lessons", "table_coverage", "table_anomalies", "table_regret",
                 "table_bootstrap", "table_bounds", "table_counts")
"""The report tables (``studies/luck/tables.py``)."""

ANALYSIS_TABLES = ("quantities", "readings", "remedies", "cell_rates", "missingness", "lessons", "coverage",
                   "endpoints", "anomalies", "regret", "bootstrap")
"""The analysis tables written beside registered.json (``studies/luck/analysis.py``)."""

HEADLINE = {"P2": "P2: good decision, outcome x memory interaction",
            "P3m": "P3m: bad decision, mirror interaction"}
"""The scorecard's quantities (``studies/luck/headline.py``): the primary contrasts, by name."""
