"""Report helpers shared by the studies: table writers (Markdown, CSV, LaTeX, HTML), the
planted truth beside estimates (:mod:`memtrials.report.truth`, imported from there: it needs pandas);
the atomic writers and figure saving are re-exported from :mod:`memtrials.io`."""

from memtrials.io import atomic_write_bytes, atomic_write_text, save_figure
from memtrials.report.tables import (
    fmt_interval, fmt_p, fmt_signed, table_html, table_latex, table_markdown, write_table,
)

__all__ = [
    "atomic_write_bytes", "atomic_write_text", "fmt_interval", "fmt_p", "fmt_signed",
    "save_figure", "table_html", "table_latex", "table_markdown", "write_table",
]
