# Known-answer runs (issue 38; README "Known-answer runs"): one section gathering every study's
# planted tables.  A study's rules file appends {"study": ..., "stem": ...} entries to
# KNOWN_ANSWER_TABLES (common.smk) and KNOWN_ANSWER_INPUTS (the files that write them); this
# file is included after every study's, so the list is complete when the rule is made.


rule known_answer_report:
    input:
        lambda wc: list(dict.fromkeys(KNOWN_ANSWER_INPUTS)),
    output:
        md="results/known_answer/index.md",
        html=report(
            "results/known_answer/index.html",
            caption="../report/known_answer/index.rst",
            category="Known-answer runs",
            subcategory="All studies",
            labels={"name": "index"},
        ),
    log:
        "logs/known_answer/report.log",
    conda:
        CONDA_ENV
    params:
        entries=lambda wc: list(KNOWN_ANSWER_TABLES),
    script:
        "../scripts/known_answer_report.py"


if KNOWN_ANSWER_TABLES:
    FINAL_TARGETS.extend(rules.known_answer_report.output)
