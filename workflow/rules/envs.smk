# Environments (issue 4; docs/environments.md): offline data, task tables, and the
# scripted-agent check.  Logic lives in src/memtrials/envs/ (build.py is what these
# rules run); the scripts only pass snakemake.* on.

from memtrials.envs.build import (
    env_data_inputs,
    task_table_params,
    webshop_data_files,
)  # noqa: E402

ENVS_CFG = config["envs"]


rule env_alfworld_games:
    output:
        games=directory("resources/alfworld/games"),
        manifest="resources/alfworld/games.parquet",
    log:
        "logs/envs/alfworld_games.log",
    # every ALFWorld cell waits for the games: start them first, while both cores are free
    # (a job of 2 threads never starts once 1-thread jobs keep one core busy)
    priority: 100
    conda:
        CONDA_ENV
    threads: lambda wc: int(ENVS_CFG["alfworld"]["workers"])
    params:
        envs={k: ENVS_CFG[k] for k in ("seed", "alfworld")},
    script:
        "../scripts/env_alfworld_games.py"


rule env_appworld_data:
    input:
        # AppWorld's evaluator on every authored task (memtrials.envs.appworld.verify)
        verified="src/memtrials/envs/appworld/verification.json",
    output:
        data=directory("resources/appworld/data"),
        manifest="resources/appworld/tasks.parquet",
    log:
        "logs/envs/appworld_data.log",
    priority: 90  # every AppWorld cell waits for it (see env_alfworld_games)
    conda:
        CONDA_ENV
    threads: 2  # saving and verifying tasks by AppWorld's evaluator, in this many processes
    params:
        envs={k: ENVS_CFG[k] for k in ("seed", "appworld")},
    script:
        "../scripts/env_appworld_data.py"


rule env_webshop_data:
    input:
        # the shipped data (catalog, attributes, Lucene's document tokens) and their digests
        data=lambda wc: webshop_data_files(ENVS_CFG),
    output:
        setup="resources/webshop/setup.json",
    log:
        "logs/envs/webshop_data.log",
    priority: 90  # every WebShop job waits for it (see env_alfworld_games)
    conda:
        CONDA_ENV
    params:
        envs={k: ENVS_CFG[k] for k in ("seed", "webshop")},
    script:
        "../scripts/env_webshop_data.py"


rule env_tasks:
    input:
        lambda wc: env_data_inputs(ENVS_CFG, wc.env),
    output:
        "results/tasks/{env}.parquet",
    log:
        "logs/envs/tasks/{env}.log",
    wildcard_constraints:
        env="alfworld|scienceworld|appworld|webshop|planted",
    conda:
        CONDA_ENV
    params:
        envs=lambda wc: task_table_params(ENVS_CFG, wc.env),
    script:
        "../scripts/env_tasks.py"


rule env_check:
    input:
        tasks="results/tasks/{env}.parquet",
    output:
        "results/envcheck/{env}.parquet",
    log:
        "logs/envs/envcheck/{env}.log",
    wildcard_constraints:
        env="alfworld|scienceworld|appworld|webshop|planted",
    conda:
        CONDA_ENV
    params:
        envs=lambda wc: {k: ENVS_CFG[k] for k in ("seed", "check", wc.env)},
    script:
        "../scripts/env_check.py"


FINAL_TARGETS.extend(
    expand(
        ["results/tasks/{env}.parquet", "results/envcheck/{env}.parquet"],
        env=ENVS_CFG["run"],
    )
)
