# The learned calibrator of action calibration (issue 12; docs/calibrator.md), section 6:
# Raw source rollouts on training splits -> decision contexts -> generator reviews (G.2)
# -> judge's content screen -> paired next actions per recipient actor and blind A/B
# judgements -> labels (q(E) and the target rule) -> SFT datasets per variant -> SFT
# (off by default; its own environment) -> Calibrator rollouts -> tables and figures.
# One job per stage and model, never per context.  Logic: src/memtrials/studies/history/
# calibrator/ (config slices, code lists and targets in its workflow.py, CAL below).

# memtrials.studies.history.calibrator.workflow.CalibratorWorkflow, built once (common.smk: study)
CAL = study("calibrator")
# the history study, whose cells the calibrator's rollouts extend
HISTORY = study("history")


rule calibrator_sources:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("sources"),
    output:
        episodes="results/calibrator/sources/{model}/{env}.parquet",
        steps="results/calibrator/sources/{model}/{env}.steps.parquet",
        calls="results/calibrator/sources/{model}/{env}.calls.parquet",
    log:
        "logs/calibrator/sources/{model}/{env}.log",
    wildcard_constraints:
        env=CAL.alternatives(CAL.training_envs()),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        cell=lambda wc: CAL.source_cell(wc.model, wc.env),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_sources.py"


rule calibrator_contexts:
    input:
        sources=CAL.source_files(),
        code=CAL.code("contexts"),
    output:
        "results/calibrator/contexts.parquet",
    log:
        "logs/calibrator/contexts.log",
    conda:
        CONDA_ENV
    params:
        sources=CAL.source_paths(),
        n_contexts=CAL.c["contexts"]["count"],
        seed=CAL.c["seed"],
    script:
        "../scripts/calibrator_contexts.py"


rule calibrator_generate:
    input:
        contexts="results/calibrator/contexts.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("generate"),
    output:
        candidates="results/calibrator/generate/{model}.parquet",
        calls="results/calibrator/generate/{model}.calls.parquet",
    log:
        "logs/calibrator/generate/{model}.log",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        stage=lambda wc: CAL.stage_params("generate"),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_generate.py"


rule calibrator_screen:
    input:
        contexts="results/calibrator/contexts.parquet",
        candidates=f"results/calibrator/generate/{CAL.generator}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        calibrator_prompts=CAL.prompt_files(),
        code=CAL.code("screen"),
    output:
        screen="results/calibrator/screen/{model}.parquet",
        calls="results/calibrator/screen/{model}.calls.parquet",
    log:
        "logs/calibrator/screen/{model}.log",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        stage=lambda wc: CAL.stage_params("screen"),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        calibrator_prompts_dir=lambda w, input: os.path.dirname(
            input.calibrator_prompts[0]
        ),
    script:
        "../scripts/calibrator_screen.py"


rule calibrator_compare:
    input:
        contexts="results/calibrator/contexts.parquet",
        candidates=f"results/calibrator/generate/{CAL.generator}.parquet",
        screen=f"results/calibrator/screen/{CAL.judge}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        calibrator_prompts=CAL.prompt_files(),
        code=CAL.code("compare"),
    output:
        pairs="results/calibrator/compare/{model}.parquet",
        calls="results/calibrator/compare/{model}.calls.parquet",
    log:
        "logs/calibrator/compare/{model}.log",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        stage=lambda wc: CAL.stage_params("compare", wc.model),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        calibrator_prompts_dir=lambda w, input: os.path.dirname(
            input.calibrator_prompts[0]
        ),
    script:
        "../scripts/calibrator_compare.py"


rule calibrator_labels:
    input:
        contexts="results/calibrator/contexts.parquet",
        candidates=f"results/calibrator/generate/{CAL.generator}.parquet",
        screen=f"results/calibrator/screen/{CAL.judge}.parquet",
        compare=CAL.compare_files(),
        code=CAL.code("labels"),
    output:
        "results/calibrator/labels.parquet",
    log:
        "logs/calibrator/labels.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/calibrator_labels.py"


rule calibrator_dataset:
    input:
        contexts="results/calibrator/contexts.parquet",
        labels="results/calibrator/labels.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("dataset"),
    output:
        jsonl="results/calibrator/dataset/{variant}.jsonl",
        parquet="results/calibrator/dataset/{variant}.parquet",
    log:
        "logs/calibrator/dataset/{variant}.log",
    wildcard_constraints:
        variant=CAL.alternatives(CAL.variants),
    conda:
        CONDA_ENV
    params:
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_dataset.py"


rule calibrator_sft:
    input:
        dataset="results/calibrator/dataset/{variant}.jsonl",
        code=CAL.sft_code(),
        env="envs/train.txt",
    output:
        manifest="results/calibrator/sft/{variant}/memtrials-sft.json",
        recipe="results/calibrator/sft/{variant}/recipe.json",
    log:
        "logs/calibrator/sft/{variant}.log",
    wildcard_constraints:
        variant=CAL.alternatives(CAL.variants),
    conda:
        "../../envs/train.yaml"
    resources:
        gpu=CAL.train["resources"]["gpu"],
        mem_mb=CAL.train["resources"]["mem_mb"],
        runtime=CAL.train["resources"]["runtime"],
    params:
        python=CAL.train["python"],
        recipe=CAL.recipe(),
        folder=lambda w, output: os.path.dirname(output.manifest),
        models_file=config["models_file"],
    script:
        "../scripts/calibrator_sft.py"


rule calibrator_joint_sft:
    input:
        dataset="results/calibrator/joint/{arm}.jsonl",
        code=CAL.sft_code(),
        env="envs/train.txt",
    output:
        manifest="results/calibrator/sft/{arm}-seed{seed}/memtrials-sft.json",
        recipe="results/calibrator/sft/{arm}-seed{seed}/recipe.json",
    log:
        "logs/calibrator/sft/{arm}-seed{seed}.log",
    wildcard_constraints:
        arm="joint|action_only",
        seed=r"\d+",
    conda:
        "../../envs/train.yaml"
    resources:
        gpu=CAL.train["resources"]["gpu"],
        mem_mb=CAL.train["resources"]["mem_mb"],
        runtime=CAL.train["resources"]["runtime"],
    params:
        python=CAL.train["python"],
        recipe=lambda wc: {**CAL.recipe(), "seed": int(wc.seed)},
        folder=lambda w, output: os.path.dirname(output.manifest),
        models_file=config["models_file"],
    script:
        "../scripts/calibrator_sft.py"


rule calibrator_rollouts:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("rollouts"),
        manifests=CAL.manifests(CAL.roles.get("calibrator")),
    output:
        episodes="results/calibrator/rollouts/{model}/{env}/calibrator.parquet",
        steps="results/calibrator/rollouts/{model}/{env}/calibrator.steps.parquet",
        calls="results/calibrator/rollouts/{model}/{env}/calibrator.calls.parquet",
    log:
        "logs/calibrator/rollouts/{model}/{env}.log",
    wildcard_constraints:
        env=CAL.alternatives(CAL.rollout_envs),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        cell=lambda wc: {
            **HISTORY.cell(wc.model, wc.env),
            "calibrator": CAL.role("calibrator"),
        },
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_rollouts.py"


rule calibrator_trained_rollouts:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("rollouts"),
        manifests=lambda wc: CAL.manifests(wc.who),
    output:
        episodes="results/calibrator/rollouts/{model}/{env}/calibrator-{who}.parquet",
        steps="results/calibrator/rollouts/{model}/{env}/calibrator-{who}.steps.parquet",
        calls="results/calibrator/rollouts/{model}/{env}/calibrator-{who}.calls.parquet",
    log:
        "logs/calibrator/rollouts/{model}/{env}-{who}.log",
    wildcard_constraints:
        env=CAL.alternatives(CAL.rollout_envs),
        who=CAL.alternatives(CAL.trained_cals or ["-"]),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        cell=lambda wc: {
            **HISTORY.cell(wc.model, wc.env),
            "calibrator": {"name": wc.who, **CAL.endpoint(wc.who)},
        },
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_rollouts.py"


rule calibrator_ablation_rollouts:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("rollouts"),
        manifests=lambda wc: CAL.manifests(CAL.ablation_endpoints[wc.variant]),
    output:
        episodes="results/calibrator/ablation/{variant}/{model}/{env}.parquet",
        steps="results/calibrator/ablation/{variant}/{model}/{env}.steps.parquet",
        calls="results/calibrator/ablation/{variant}/{model}/{env}.calls.parquet",
    log:
        "logs/calibrator/ablation/{variant}/{model}/{env}.log",
    wildcard_constraints:
        env=CAL.alternatives(CAL.rollout_envs),
        variant=CAL.alternatives(list(CAL.ablation_endpoints)),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        cell=lambda wc: {
            **HISTORY.cell(wc.model, wc.env),
            "calibrator": CAL.ablation_role(wc.variant),
        },
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_ablation_rollouts.py"


rule calibrator_joint_rollouts:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        calibrator_prompts=CAL.prompt_files(),
        code=CAL.code("joint_rollouts"),
    output:
        episodes="results/calibrator/joint/rollouts/{arm}/{model}/{env}.parquet",
        steps="results/calibrator/joint/rollouts/{arm}/{model}/{env}.steps.parquet",
        calls="results/calibrator/joint/rollouts/{arm}/{model}/{env}.calls.parquet",
    log:
        "logs/calibrator/joint/{arm}/{model}/{env}.log",
    wildcard_constraints:
        env=CAL.alternatives(CAL.rollout_envs),
        arm="joint|action_only",
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        cell=lambda wc: CAL.joint_cell(HISTORY.cell(wc.model, wc.env)),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        calibrator_prompts_dir=lambda w, input: os.path.dirname(
            input.calibrator_prompts[0]
        ),
    script:
        "../scripts/calibrator_joint_rollouts.py"


rule calibrator_joint_sources:
    input:
        tasks="results/tasks/{env}.parquet",
        actor_prompts=HISTORY.actor_prompt_files(),
        code=CAL.code("joint_sources"),
        manifests=CAL.manifests(CAL.roles.get("calibrator")),
    output:
        episodes="results/calibrator/joint/sources/{model}/{env}.parquet",
        steps="results/calibrator/joint/sources/{model}/{env}.steps.parquet",
        calls="results/calibrator/joint/sources/{model}/{env}.calls.parquet",
    log:
        "logs/calibrator/joint/sources/{model}/{env}.log",
    wildcard_constraints:
        env=CAL.alternatives(CAL.rollout_envs),
    conda:
        CONDA_ENV
    resources:
        api=lambda wc: CAL.api(wc.model),
    params:
        cell=lambda wc: {
            **CAL.training_cell(HISTORY.cell(wc.model, wc.env), wc.env),
            "calibrator": CAL.role("calibrator"),
        },
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
    script:
        "../scripts/calibrator_joint_sources.py"


rule calibrator_joint_data:
    input:
        unpack(
            lambda wc: {
                **CAL.joint_data_files(),
                "code": CAL.code("joint"),
            }
        ),
        actor_prompts=HISTORY.actor_prompt_files(),
        calibrator_prompts=CAL.prompt_files(),
    output:
        joint="results/calibrator/joint/joint.jsonl",
        action_only="results/calibrator/joint/action_only.jsonl",
    log:
        "logs/calibrator/joint.log",
    conda:
        CONDA_ENV
    params:
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        calibrator_prompts_dir=lambda w, input: os.path.dirname(
            input.calibrator_prompts[0]
        ),
    script:
        "../scripts/calibrator_joint_data.py"


rule calibrator_report:
    input:
        unpack(lambda wc: {**CAL.report_inputs(), "code": CAL.code("report")}),
    output:
        index="results/calibrator/tables/index.md",
        # for the HTML report: the tables and figures a run writes depend on its design
        # (workflow/report/README.md), so the folders are marked, with one caption file each
        tables=report(
            directory("results/calibrator/tables"),
            patterns=["{name}.html"],
            caption="../report/calibrator/tables.rst",
            category="The learned calibrator",
            subcategory="Tables",
            labels={"name": "{name}"},
        ),
        figures=report(
            directory("results/calibrator/figures"),
            patterns=["{name}.png"],
            caption="../report/calibrator/figures.rst",
            category="The learned calibrator",
            subcategory="Figures",
            labels={"name": "{name}"},
        ),
    log:
        "logs/calibrator/report.log",
    conda:
        CONDA_ENV
    params:
        trained_endpoints=CAL.trained_folders(),
        served=CAL.served_checkpoints(),
        calibrator=CAL.roles.get("calibrator"),
        ablation=CAL.ablation_endpoints,
        tables_dir=lambda w, output: os.path.dirname(output.index),
        figures_dir=lambda w, output: output.figures,
    script:
        "../scripts/calibrator_report.py"


# The known-answer run (issue 38; docs/calibrator.md): the label chain on the planted world with the
# planted calibrator (calibrator.known_answer.endpoint) in every role, through the real client; the
# table puts the planted truth beside each estimate.  One job.
rule calibrator_known_answer:
    input:
        actor_prompts=HISTORY.actor_prompt_files(),
        prompts=CAL.prompt_files(),
        code=CAL.code("known"),
    output:
        tables=get_report_items(
            CAL.known_paths(), "calibrator", "The learned calibrator"
        ),
        known="results/calibrator/known/known_answer.parquet",
        labels="results/calibrator/known/labels.parquet",
    log:
        "logs/calibrator/known_answer.log",
    conda:
        CONDA_ENV
    params:
        known=CAL.known_cell(),
        actor_prompts_dir=lambda w, input: os.path.dirname(input.actor_prompts[0]),
        prompts_dir=lambda w, input: os.path.dirname(input.prompts[0]),
    script:
        "../scripts/calibrator_known_answer.py"


if CAL.known_paths():
    KNOWN_ANSWER_TABLES.extend(
        {"study": "calibrator", "stem": stem}
        for stem in ["results/calibrator/known/tables/known_answer"]
    )
    KNOWN_ANSWER_INPUTS.extend(rules.calibrator_known_answer.output.tables)
