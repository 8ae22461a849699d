# Lessons from Luck (issue 3; docs/luck.md): worlds -> freeze -> lessons -> reader answers ->
# registered analysis (verifies the freeze, locks the records) -> its independent
# re-implementation and comparison (REIMPL_COMPARISON.json) -> tables and Figure 1, for
# every endpoint of the luck panel.  Logic lives in src/memtrials/studies/luck/ (the config
# slice, code lists and targets: studies/luck/workflow.py); the scripts only pass snakemake.* on.
# Re-freeze on purpose:  python -m memtrials.studies.luck.freeze --refreeze

# memtrials.studies.luck.workflow.LuckWorkflow, built once (common.smk: study)
LW = study("luck")


rule luck_worlds:
    input:
        code=LW.code("worlds"),
    output:
        "results/luck/worlds.parquet",
    log:
        "logs/luck/worlds.log",
    conda:
        CONDA_ENV
    params:
        worlds=LW.worlds(),
    script:
        "../scripts/luck_worlds.py"


rule luck_freeze:
    input:
        worlds="results/luck/worlds.parquet",
        prompts=LW.prompt_files(),
        code=LW.code("freeze"),
    output:
        "results/luck/freeze/manifest.json",
    log:
        "logs/luck/freeze.log",
    conda:
        CONDA_ENV
    params:
        slice=LW.slice(),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        registered=LW.registered,
    script:
        "../scripts/luck_freeze.py"


rule luck_writers:
    input:
        worlds="results/luck/worlds.parquet",
        manifest=ancient("results/luck/freeze/manifest.json"),
        prompts=LW.prompt_files(),
    output:
        lessons="results/luck/{model}/lessons.parquet",
        calls="results/luck/{model}/lessons.calls.parquet",
    log:
        "logs/luck/{model}/writers.log",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: LW.api(wc.model),
    params:
        slice=LW.slice(),
        max_tokens=LW.max_tokens("writer"),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        registered=LW.registered,
    script:
        "../scripts/luck_writers.py"


rule luck_readers:
    input:
        worlds="results/luck/worlds.parquet",
        lessons="results/luck/{model}/lessons.parquet",
        manifest=ancient("results/luck/freeze/manifest.json"),
        prompts=LW.prompt_files(),
    output:
        answers="results/luck/{model}/answers.parquet",
        calls="results/luck/{model}/answers.calls.parquet",
    log:
        "logs/luck/{model}/readers.log",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: LW.api(wc.model),
    params:
        slice=LW.slice(),
        max_tokens=LW.max_tokens("reader"),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        registered=LW.registered,
    script:
        "../scripts/luck_readers.py"


rule luck_analysis:
    input:
        worlds="results/luck/worlds.parquet",
        manifest=ancient("results/luck/freeze/manifest.json"),
        prompts=LW.prompt_files(),
        answers=LW.per_model("answers.parquet"),
        lessons=LW.per_model("lessons.parquet"),
        calls=LW.per_model("answers.calls.parquet")
        + LW.per_model("lessons.calls.parquet"),
        code=LW.code("analysis"),
    output:
        registered="results/luck/analysis/registered.json",
        examples="results/luck/analysis/examples.md",
        tables=expand("results/luck/analysis/{name}.parquet", name=LW.analysis_tables()),
    log:
        "logs/luck/analysis.log",
    conda:
        CONDA_ENV
    params:
        rules=LW.analysis_rules(),
        slice=LW.slice(),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        registered=LW.registered,
    script:
        "../scripts/luck_analysis.py"


rule luck_reimpl:
    input:
        worlds="results/luck/worlds.parquet",
        answers=LW.per_model("answers.parquet"),
        registered="results/luck/analysis/registered.json",
        tables=expand("results/luck/analysis/{name}.parquet", name=LW.analysis_tables()),
        code=LW.code("analysis"),
    output:
        "results/luck/analysis/REIMPL_COMPARISON.json",
    log:
        "logs/luck/reimpl.log",
    conda:
        CONDA_ENV
    params:
        rules=LW.analysis_rules(),
    script:
        "../scripts/luck_reimpl.py"


rule luck_report:
    input:
        registered="results/luck/analysis/registered.json",
        tables=expand("results/luck/analysis/{name}.parquet", name=LW.analysis_tables()),
        code=LW.code("report"),
    output:
        tables=get_report_items(LW.table_paths(), "luck", "Lessons from Luck"),
        figures=get_report_items(LW.figure_paths(), "luck", "Lessons from Luck"),
    log:
        "logs/luck/report.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/luck_report.py"


# The known-answer run (issue 38; docs/luck.md): the planted endpoint luck.known_answer.endpoint
# writes and reads on worlds of its own through the real client; the registered analysis
# estimates every contrast and the tables put the planted truth beside each estimate.  Not a
# registered run: no freeze, no lock, not in the panel's tables.
rule luck_known_answer:
    input:
        prompts=LW.prompt_files(),
        code=LW.code("known"),
    output:
        tables=get_report_items(LW.known_paths(), "luck", "Lessons from Luck"),
        contrasts="results/luck/known/known_answer.parquet",
        cells="results/luck/known/known_answer_cells.parquet",
        answers="results/luck/known/answers.parquet",
        lessons="results/luck/known/lessons.parquet",
    log:
        "logs/luck/known_answer.log",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: LW.api(LW.luck["known_answer"]["endpoint"]),
    params:
        known=LW.known_cell() if LW.luck["known_answer"]["enabled"] else {},
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
    script:
        "../scripts/luck_known_answer.py"


if LW.known_paths():
    KNOWN_ANSWER_TABLES.extend(
        {"study": "luck", "stem": stem}
        for stem in [
            "results/luck/tables/known_answer",
            "results/luck/tables/known_answer_cells",
        ]
    )
    KNOWN_ANSWER_INPUTS.extend(rules.luck_known_answer.output.tables)
