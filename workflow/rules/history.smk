# History interventions and action calibration (issue 5; docs/history.md):
# full rollouts per (model, env, condition) cell -> reference continuation from Raw
# sources -> repetition probe on Raw histories -> tables and figures.
# Logic lives in src/hindsight/agent/ and src/hindsight/studies/history/ (the config
# slice of each cell: studies/history/workflow.py); the scripts only pass snakemake.* on.

from hindsight.studies.history.workflow import HistoryWorkflow  # noqa: E402

try:
    HW = HistoryWorkflow(config, MODELS, get_endpoint_params)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None


rule history_rollouts:
    input:
        tasks="results/tasks/{env}.parquet",
        prompts=HW.prompt_files(),
        code=HW.code("rollouts"),
    output:
        episodes="results/history/rollouts/{model}/{env}/{condition}.parquet",
        steps="results/history/rollouts/{model}/{env}/{condition}.steps.parquet",
        calls="results/history/rollouts/{model}/{env}/{condition}.calls.parquet",
    params:
        cell=lambda wc: HW.cell(wc.model, wc.env),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
    log:
        "logs/history/rollouts/{model}/{env}/{condition}.log",
    wildcard_constraints:
        env=HW.alternatives(HW.envs),
        condition=HW.alternatives(HW.conditions),
    resources:
        api=lambda wc: HW.api(wc.model),
    conda:
        CONDA_ENV
    script:
        "../scripts/history_rollouts.py"


rule history_continuation:
    input:
        episodes="results/history/rollouts/{model}/{env}/raw.parquet",
        steps="results/history/rollouts/{model}/{env}/raw.steps.parquet",
        prompts=HW.prompt_files(),
        code=HW.code("continuation"),
    output:
        episodes="results/history/continuation/{model}/{env}/{condition}.parquet",
        steps="results/history/continuation/{model}/{env}/{condition}.steps.parquet",
        calls="results/history/continuation/{model}/{env}/{condition}.calls.parquet",
    params:
        cell=lambda wc: HW.cell(wc.model, wc.env, "continuation"),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
    log:
        "logs/history/continuation/{model}/{env}/{condition}.log",
    wildcard_constraints:
        env=HW.alternatives(HW.envs),
        condition=HW.alternatives(HW.cont_conditions),
    resources:
        api=lambda wc: HW.api(wc.model),
    conda:
        CONDA_ENV
    script:
        "../scripts/history_continuation.py"


rule history_probe:
    input:
        episodes="results/history/rollouts/{model}/{env}/raw.parquet",
        steps="results/history/rollouts/{model}/{env}/raw.steps.parquet",
        prompts=HW.prompt_files(),
        code=HW.code("probe"),
    output:
        responses="results/history/probe/{model}/{env}.parquet",
        screen="results/history/probe/{model}/{env}.screen.parquet",
        calls="results/history/probe/{model}/{env}.calls.parquet",
    params:
        cell=lambda wc: HW.cell(wc.model, wc.env, "probe"),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
    log:
        "logs/history/probe/{model}/{env}.log",
    wildcard_constraints:
        env=HW.alternatives(HW.envs),
    resources:
        api=lambda wc: HW.api(wc.model),
    conda:
        CONDA_ENV
    script:
        "../scripts/history_probe.py"


rule history_report:
    input:
        unpack(lambda wc: {**HW.report_inputs(), "code": HW.code("report")}),
    output:
        index="results/history/tables/index.md",
    params:
        analysis=HW.h["analysis"],
        tables_dir=lambda w, output: os.path.dirname(output.index),
        figures_dir=lambda w, output: os.path.join(os.path.dirname(os.path.dirname(output.index)), "figures"),
    log:
        "logs/history/report.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/history_report.py"


# The task tables come from workflow/rules/envs.smk (the environments' issue); until that
# file exists, `snakemake` without a target leaves this study out instead of failing.
if HW.enabled and HW.h and HW.models and HW.envs and os.path.exists(
    os.path.join(workflow.basedir, "workflow", "rules", "envs.smk")
):
    FINAL_TARGETS.append("results/history/tables/index.md")
