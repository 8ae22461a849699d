# Playbook curation (issue 9; docs/playbook.md): one job per growth run, per practice
# round, per candidate scoring and per evaluated candidate of every setting
# (growth recipe x model x benchmark x system variant), then tables and figures.
# Logic lives in src/memtrials/studies/playbook/ (slices, code lists and targets:
# studies/playbook/workflow.py, PLAYBOOK below); the scripts only pass snakemake.* on.

# memtrials.studies.playbook.workflow.PlaybookWorkflow, built once (common.smk: study)
PLAYBOOK = study("playbook")


wildcard_constraints:
    growth=PLAYBOOK.alternatives("growth"),
    variant=PLAYBOOK.alternatives("variant"),
    k=r"\d+",


rule playbook_growth:
    input:
        tasks="results/tasks/{env}.parquet",
        prompts=PLAYBOOK.prompt_files(),
        actor_prompts=PLAYBOOK.actor_prompt_files(),
        code=lambda wc: PLAYBOOK.code("growth") + PLAYBOOK.memory_code(wc.variant),
    output:
        playbooks="results/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.playbooks.parquet",
        episodes="results/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.parquet",
        steps="results/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.steps.parquet",
        calls="results/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.calls.parquet",
        record="results/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.json",
    log:
        "logs/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.log",
    wildcard_constraints:
        env=PLAYBOOK.alternatives("env"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: PLAYBOOK.api(wc.model),
    params:
        cell=lambda wc: PLAYBOOK.cell("growth", wc.model, wc.env, wc.variant),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/playbook_growth.py"


rule playbook_practice:
    input:
        tasks="results/tasks/{env}.parquet",
        playbooks="results/playbook/{growth}/{model}/{env}/{variant}/growth/run{k}.playbooks.parquet",
        actor_prompts=PLAYBOOK.actor_prompt_files(),
        code=PLAYBOOK.code("practice"),
    output:
        record="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.json",
        blocks="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.blocks.parquet",
        design="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.design.parquet",
        estimates="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.estimates.parquet",
        episodes="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.parquet",
        steps="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.steps.parquet",
        calls="results/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.calls.parquet",
    log:
        "logs/playbook/{growth}/{model}/{env}/{variant}/practice/run{k}.log",
    wildcard_constraints:
        env=PLAYBOOK.alternatives("env"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: PLAYBOOK.api(wc.model),
    params:
        cell=lambda wc: PLAYBOOK.cell("practice", wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/playbook_practice.py"


rule playbook_choice:
    input:
        tasks="results/tasks/{env}.parquet",
        playbooks=lambda wc: PLAYBOOK.run_paths(wc, "playbooks"),
        practice=lambda wc: PLAYBOOK.run_paths(wc, "practice"),
        actor_prompts=PLAYBOOK.actor_prompt_files(),
        code=PLAYBOOK.code("choice"),
    output:
        record="results/playbook/{growth}/{model}/{env}/{variant}/choice.json",
        scores="results/playbook/{growth}/{model}/{env}/{variant}/choice.scores.parquet",
        episodes="results/playbook/{growth}/{model}/{env}/{variant}/choice.parquet",
        steps="results/playbook/{growth}/{model}/{env}/{variant}/choice.steps.parquet",
        calls="results/playbook/{growth}/{model}/{env}/{variant}/choice.calls.parquet",
    log:
        "logs/playbook/{growth}/{model}/{env}/{variant}/choice.log",
    wildcard_constraints:
        env=PLAYBOOK.alternatives("env"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: PLAYBOOK.api(wc.model),
    params:
        cell=lambda wc: PLAYBOOK.cell("choice", wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/playbook_choice.py"


rule playbook_eval:
    input:
        tasks="results/tasks/{env}.parquet",
        choice="results/playbook/{growth}/{model}/{env}/{variant}/choice.json",
        playbooks=lambda wc: PLAYBOOK.run_paths(wc, "playbooks"),
        actor_prompts=PLAYBOOK.actor_prompt_files(),
        code=PLAYBOOK.code("eval"),
    output:
        episodes="results/playbook/{growth}/{model}/{env}/{variant}/eval/{candidate}.parquet",
        steps="results/playbook/{growth}/{model}/{env}/{variant}/eval/{candidate}.steps.parquet",
        calls="results/playbook/{growth}/{model}/{env}/{variant}/eval/{candidate}.calls.parquet",
    log:
        "logs/playbook/{growth}/{model}/{env}/{variant}/eval/{candidate}.log",
    wildcard_constraints:
        env=PLAYBOOK.alternatives("env"),
        candidate=PLAYBOOK.alternatives("candidate"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: PLAYBOOK.api(wc.model),
    params:
        cell=lambda wc: PLAYBOOK.cell("eval", wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/playbook_eval.py"


rule playbook_pooled:
    input:
        tasks="results/tasks/{env}.parquet",
        playbooks=lambda wc: PLAYBOOK.run_paths(wc, "playbooks"),
        actor_prompts=PLAYBOOK.actor_prompt_files(),
        code=PLAYBOOK.code("pooled"),
    output:
        record="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.json",
        playbooks="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.playbooks.parquet",
        blocks="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.blocks.parquet",
        design="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.design.parquet",
        estimates="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.estimates.parquet",
        episodes="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.parquet",
        steps="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.steps.parquet",
        calls="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.calls.parquet",
        merge_calls="results/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.merge.calls.parquet",
    log:
        "logs/playbook/{growth}/{model}/{env}/{variant}/pooled/practice.log",
    wildcard_constraints:
        env=PLAYBOOK.alternatives("env"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: PLAYBOOK.api(wc.model),
    params:
        cell=lambda wc: PLAYBOOK.cell("pooled", wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/playbook_pooled.py"


rule playbook_baseline:
    input:
        tasks="results/tasks/{env}.parquet",
        choice="results/playbook/{growth}/{model}/{env}/{variant}/choice.json",
        playbooks=lambda wc: PLAYBOOK.run_paths(wc, "playbooks"),
        practice=lambda wc: PLAYBOOK.run_paths(wc, "practice"),
        pooled=lambda wc: PLAYBOOK.pooled_input(wc),
        prompts=PLAYBOOK.baseline_prompt_files(),
        actor_prompts=PLAYBOOK.actor_prompt_files(),
        code=PLAYBOOK.code("baseline"),
    output:
        record="results/playbook/{growth}/{model}/{env}/{variant}/baseline/{method}.json",
        episodes="results/playbook/{growth}/{model}/{env}/{variant}/baseline/{method}.parquet",
        steps="results/playbook/{growth}/{model}/{env}/{variant}/baseline/{method}.steps.parquet",
        calls="results/playbook/{growth}/{model}/{env}/{variant}/baseline/{method}.calls.parquet",
        select_calls="results/playbook/{growth}/{model}/{env}/{variant}/baseline/{method}.select.calls.parquet",
    log:
        "logs/playbook/{growth}/{model}/{env}/{variant}/baseline/{method}.log",
    wildcard_constraints:
        env=PLAYBOOK.alternatives("env"),
        method=PLAYBOOK.alternatives("method"),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: PLAYBOOK.api(wc.model),
    params:
        cell=lambda wc: PLAYBOOK.cell("baseline", wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
    script:
        "../scripts/playbook_baseline.py"


rule playbook_report:
    input:
        unpack(lambda wc: {**PLAYBOOK.report_inputs(), "code": PLAYBOOK.code("report")}),
    output:
        index="results/playbook/tables/index.md",
        # for the HTML report: the tables and figures a run writes depend on its design
        # (workflow/report/README.md), so the folders are marked, with one caption file each
        tables=report(
            directory("results/playbook/tables"),
            patterns=["{name}.html"],
            caption="../report/playbook/tables.rst",
            category="Playbook curation",
            subcategory="Tables",
            labels={"name": "{name}"},
        ),
        figures=report(
            directory("results/playbook/figures"),
            patterns=["{name}.png"],
            caption="../report/playbook/figures.rst",
            category="Playbook curation",
            subcategory="Figures",
            labels={"name": "{name}"},
        ),
    log:
        "logs/playbook/report.log",
    conda:
        CONDA_ENV
    params:
        long_growth=PLAYBOOK.p["long_growth"],
        tables_dir=lambda w, output: os.path.dirname(output.index),
        figures_dir=lambda w, output: output.figures,
    script:
        "../scripts/playbook_report.py"


rule playbook_diagnostics:
    input:
        unpack(
            lambda wc: {
                **PLAYBOOK.diagnostics_inputs(),
                "code": PLAYBOOK.code("diagnostics"),
            }
        ),
    output:
        index="results/playbook/diagnostics/index.md",
        tables=report(
            directory("results/playbook/diagnostics/tables"),
            patterns=["{name}.html"],
            caption="../report/playbook/diagnostics_tables.rst",
            category="Playbook curation",
            subcategory="Diagnostics",
            labels={"name": "{name}"},
        ),
        figures=report(
            directory("results/playbook/diagnostics/figures"),
            patterns=["{name}.png"],
            caption="../report/playbook/diagnostics_figures.rst",
            category="Playbook curation",
            subcategory="Diagnostics",
            labels={"name": "{name}"},
        ),
    log:
        "logs/playbook/diagnostics.log",
    conda:
        CONDA_ENV
    params:
        halvings=PLAYBOOK.p["diagnostics"]["halvings"],
        seed=PLAYBOOK.p["seed"],
        budget=PLAYBOOK.p["measurement"]["budget"],
        rule=PLAYBOOK.p["measurement"]["curate_rule"],
    script:
        "../scripts/playbook_diagnostics.py"


# Issue 38: the known-answer run (the study's jobs on the planted world with a planted agent, in
# one job; docs/playbook.md "Known-answer run"), listed in the Known-answer runs section.
if PLAYBOOK.known_answer() is not None:

    rule playbook_known_answer:
        input:
            tasks="results/tasks/planted.parquet",
            actor_prompts=PLAYBOOK.actor_prompt_files(),
            memory_prompts=PLAYBOOK.prompt_files(),
            code=PLAYBOOK.code("known_answer"),
        output:
            summary="results/playbook/known_answer/summary.json",
            tables=expand(
                "results/playbook/known_answer/tables/{name}.{ext}",
                name=("ka_blocks", "ka_candidates", "ka_methods", "ka_curation"),
                ext=("md", "csv", "html"),
            ),
        log:
            "logs/playbook/known_answer.log",
        conda:
            CONDA_ENV
        resources:
            api=1,
        params:
            cell=PLAYBOOK.known_answer(),
            out_dir=lambda w, output: os.path.dirname(output.summary),
            actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
            memory_prompts_dir=lambda w, input: os.path.dirname(input.memory_prompts[0]),
        script:
            "../scripts/playbook_known_answer.py"

    KNOWN_ANSWER_TABLES.extend(
        {"study": "playbook", "stem": f"results/playbook/known_answer/tables/{n}"}
        for n in ("ka_methods", "ka_blocks", "ka_candidates", "ka_curation")
    )
    KNOWN_ANSWER_INPUTS.append("results/playbook/known_answer/summary.json")
