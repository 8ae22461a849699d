# Anti-persistence (issue 11; docs/antipersist.md): one training stream per
# (model, benchmark, design, seed) -> one frozen held-out evaluation of its final memory
# -> tables and figures. Logic lives in src/memtrials/memory/ and
# src/memtrials/studies/antipersist/ (the config slice of each job, code lists and
# targets: studies/antipersist/workflow.py, ANTIPERSIST below); the scripts only pass
# snakemake.* on, by keyword.

# memtrials.studies.antipersist.workflow.AntipersistWorkflow, built once (common.smk: study)
ANTIPERSIST = study("antipersist")


rule antipersist_train:
    input:
        tasks="results/tasks/{env}.parquet",
        prompts=ANTIPERSIST.prompt_files(),
        actor_prompts=ANTIPERSIST.actor_prompt_files(),
        code=lambda wc: ANTIPERSIST.code("train") + ANTIPERSIST.memory_code(wc.design),
    output:
        episodes="results/antipersist/{model}/{env}/{design}/seed{seed}/train.parquet",
        steps="results/antipersist/{model}/{env}/{design}/seed{seed}/train.steps.parquet",
        calls="results/antipersist/{model}/{env}/{design}/seed{seed}/train.calls.parquet",
        memory="results/antipersist/{model}/{env}/{design}/seed{seed}/memory.json",
        rounds="results/antipersist/{model}/{env}/{design}/seed{seed}/rounds.json",
    log:
        "logs/antipersist/{model}/{env}/{design}/seed{seed}/train.log",
    wildcard_constraints:
        env=ANTIPERSIST.alternatives("env"),
        design=ANTIPERSIST.alternatives("design"),
        seed=ANTIPERSIST.alternatives("seed"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: ANTIPERSIST.api(wc.model),
    params:
        cell=lambda wc: ANTIPERSIST.cell(wc.model, wc.env, wc.design),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/antipersist_train.py"


rule antipersist_eval:
    input:
        tasks="results/tasks/{env}.parquet",
        memory="results/antipersist/{model}/{env}/{design}/seed{seed}/memory.json",
        rounds="results/antipersist/{model}/{env}/{design}/seed{seed}/rounds.json",
        prompts=ANTIPERSIST.prompt_files(),
        actor_prompts=ANTIPERSIST.actor_prompt_files(),
        code=lambda wc: ANTIPERSIST.code("eval") + ANTIPERSIST.memory_code(wc.design),
    output:
        episodes="results/antipersist/{model}/{env}/{design}/seed{seed}/eval.parquet",
        steps="results/antipersist/{model}/{env}/{design}/seed{seed}/eval.steps.parquet",
        calls="results/antipersist/{model}/{env}/{design}/seed{seed}/eval.calls.parquet",
        record="results/antipersist/{model}/{env}/{design}/seed{seed}/eval.json",
    log:
        "logs/antipersist/{model}/{env}/{design}/seed{seed}/eval.log",
    wildcard_constraints:
        env=ANTIPERSIST.alternatives("env"),
        design=ANTIPERSIST.alternatives("design"),
        seed=ANTIPERSIST.alternatives("seed"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: ANTIPERSIST.api(wc.model),
    params:
        cell=lambda wc: ANTIPERSIST.cell(wc.model, wc.env, wc.design),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        every_round=ANTIPERSIST.a["eval_every_round"],
    script:
        "../scripts/antipersist_eval.py"


rule antipersist_report:
    input:
        unpack(
            lambda wc: {
                **ANTIPERSIST.report_inputs(),
                "code": ANTIPERSIST.code("report"),
            }
        ),
    output:
        index="results/antipersist/tables/index.md",
        # for the HTML report: the tables and figures a run writes depend on its design
        # (workflow/report/README.md), so the folders are marked, with one caption file each
        tables=report(
            directory("results/antipersist/tables"),
            patterns=["{name}.html"],
            caption="../report/antipersist/tables.rst",
            category="Anti-persistence",
            subcategory="Tables",
            labels={"name": "{name}"},
        ),
        figures=report(
            directory("results/antipersist/figures"),
            patterns=["{name}.png"],
            caption="../report/antipersist/figures.rst",
            category="Anti-persistence",
            subcategory="Figures",
            labels={"name": "{name}"},
        ),
    log:
        "logs/antipersist/report.log",
    conda:
        CONDA_ENV
    params:
        sweeps=ANTIPERSIST.sweep_plan(),
        tables_dir=lambda w, output: os.path.dirname(output.index),
        figures_dir=lambda w, output: output.figures,
    script:
        "../scripts/antipersist_report.py"


# Issue 38: the known-answer run (the study's streams on the planted world with a planted agent, in
# one job; docs/antipersist.md "Known-answer run"), listed in the Known-answer runs section.
if ANTIPERSIST.known_answer() is not None:

    rule antipersist_known_answer:
        input:
            tasks="results/tasks/planted.parquet",
            prompts=ANTIPERSIST.prompt_files(),
            actor_prompts=ANTIPERSIST.actor_prompt_files(),
            code=ANTIPERSIST.code("known_answer"),
        output:
            summary="results/antipersist/known_answer/summary.json",
            tables=expand(
                "results/antipersist/known_answer/tables/{name}.{ext}",
                name=("ka_modes", "ka_selector", "ka_flaws", "ka_rounds"),
                ext=("md", "csv", "html"),
            ),
        log:
            "logs/antipersist/known_answer.log",
        conda:
            CONDA_ENV
        resources:
            api=1,
        params:
            cell=ANTIPERSIST.known_answer(),
            out_dir=lambda w, output: os.path.dirname(output.summary),
            prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
            actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        script:
            "../scripts/antipersist_known_answer.py"

    KNOWN_ANSWER_TABLES.extend(
        {
            "study": "antipersist",
            "stem": f"results/antipersist/known_answer/tables/{n}",
        }
        for n in ("ka_modes", "ka_selector", "ka_flaws", "ka_rounds")
    )
    KNOWN_ANSWER_INPUTS.append("results/antipersist/known_answer/summary.json")
