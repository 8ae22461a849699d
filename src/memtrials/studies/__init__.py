"""One subpackage per study: what a cell runs, its analysis, its tables and figures."""
