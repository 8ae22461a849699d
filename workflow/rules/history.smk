# History interventions and action calibration (issue 5; docs/history.md):
# full rollouts per (model, env, condition) cell -> reference continuation from Raw
# sources -> repetition probe on Raw histories -> tables and figures.
# Logic lives in src/memtrials/agent/ and src/memtrials/studies/history/ (the config
# slice of each cell, code lists and targets: studies/history/workflow.py, HISTORY below);
# the scripts only pass snakemake.* on, by keyword.

# memtrials.studies.history.workflow.HistoryWorkflow, built once (common.smk: study)
HISTORY = study("history")


rule history_rollouts:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=HISTORY.code("rollouts"),
    output:
        episodes="results/history/rollouts/{model}/{env}/{condition}.parquet",
        steps="results/history/rollouts/{model}/{env}/{condition}.steps.parquet",
        calls="results/history/rollouts/{model}/{env}/{condition}.calls.parquet",
    log:
        "logs/history/rollouts/{model}/{env}/{condition}.log",
    wildcard_constraints:
        env=HISTORY.alternatives(HISTORY.rule_envs),
        condition=HISTORY.alternatives(HISTORY.rule_conditions),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: HISTORY.api(wc.model),
    params:
        cell=lambda wc: HISTORY.cell(wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/history_rollouts.py"


rule history_continuation:
    input:
        episodes="results/history/rollouts/{model}/{env}/raw.parquet",
        steps="results/history/rollouts/{model}/{env}/raw.steps.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=HISTORY.code("continuation"),
    output:
        episodes="results/history/continuation/{model}/{env}/{condition}.parquet",
        steps="results/history/continuation/{model}/{env}/{condition}.steps.parquet",
        calls="results/history/continuation/{model}/{env}/{condition}.calls.parquet",
    log:
        "logs/history/continuation/{model}/{env}/{condition}.log",
    wildcard_constraints:
        env=HISTORY.alternatives(HISTORY.envs),
        condition=HISTORY.alternatives(HISTORY.view_conditions),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: HISTORY.api(wc.model),
    params:
        cell=lambda wc: HISTORY.cell(wc.model, wc.env, "continuation"),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/history_continuation.py"


# A user's memory served at resumption (condition memory-<name>[-chat]; docs/memory.md): the
# continuation cell plus the memory's snapshot after it learned from the cell's sources.
rule history_continuation_memory:
    input:
        episodes="results/history/rollouts/{model}/{env}/raw.parquet",
        steps="results/history/rollouts/{model}/{env}/raw.steps.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=lambda wc: HISTORY.code("continuation") + HISTORY.memory_code(wc.condition),
    output:
        episodes="results/history/continuation/{model}/{env}/{condition}.parquet",
        steps="results/history/continuation/{model}/{env}/{condition}.steps.parquet",
        calls="results/history/continuation/{model}/{env}/{condition}.calls.parquet",
        memory="results/history/continuation/{model}/{env}/{condition}.memory.json",
    log:
        "logs/history/continuation/{model}/{env}/{condition}.log",
    wildcard_constraints:
        env=HISTORY.alternatives(HISTORY.envs),
        condition=HISTORY.alternatives(HISTORY.memory_conditions),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: HISTORY.api(wc.model),
    params:
        cell=lambda wc: HISTORY.cell(wc.model, wc.env, "continuation", wc.condition),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/history_continuation.py"


rule history_probe:
    input:
        episodes="results/history/rollouts/{model}/{env}/raw.parquet",
        steps="results/history/rollouts/{model}/{env}/raw.steps.parquet",
        prompts=HISTORY.prompt_files(),
        actor_prompts=HISTORY.actor_prompt_files(),
        code=HISTORY.code("probe"),
    output:
        responses="results/history/probe/{model}/{env}.parquet",
        screen="results/history/probe/{model}/{env}.screen.parquet",
        calls="results/history/probe/{model}/{env}.calls.parquet",
    log:
        "logs/history/probe/{model}/{env}.log",
    wildcard_constraints:
        env=HISTORY.alternatives(HISTORY.envs),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: HISTORY.api(wc.model),
    params:
        cell=lambda wc: HISTORY.cell(wc.model, wc.env, "probe"),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/history_probe.py"


rule history_report:
    input:
        unpack(lambda wc: {**HISTORY.report_inputs(), "code": HISTORY.code("report")}),
    output:
        index="results/history/tables/index.md",
        # for the HTML report: which tables and figures a run writes depends on its data
        # (workflow/report/README.md), so the folders are marked, with one caption each
        tables=report(
            directory("results/history/tables"),
            patterns=["{name}.html"],
            caption="../report/history/tables.rst",
            category="History interventions",
            subcategory="Tables",
            labels={"name": "{name}"},
        ),
        figures=report(
            directory("results/history/figures"),
            patterns=["{name}.png"],
            caption="../report/history/figures.rst",
            category="History interventions",
            subcategory="Figures",
            labels={"name": "{name}"},
        ),
    log:
        "logs/history/report.log",
    conda:
        CONDA_ENV
    params:
        analysis=HISTORY.h["analysis"],
        planted=HISTORY.planted_slice(),
        trained_calibrators=config["calibrator"]["trained_endpoints"],
        tables_dir=lambda w, output: os.path.dirname(output.index),
        figures_dir=lambda w, output: os.path.join(
            os.path.dirname(os.path.dirname(output.index)), "figures"
        ),
    script:
        "../scripts/history_report.py"


# known-answer runs (workflow/rules/known_answer.smk): the planted table, truth beside estimate
if HISTORY.enabled and HISTORY.planted_enabled:
    KNOWN_ANSWER_TABLES.append(
        {"study": "history", "stem": "results/history/tables/planted_views"}
    )
    KNOWN_ANSWER_INPUTS.append("results/history/tables/index.md")
