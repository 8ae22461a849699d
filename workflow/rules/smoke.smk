# Smoke path: one fixed question to every panel endpoint, through memtrials.llm
# (config validation, embedded server, client, cache and recorder end to end).


rule smoke:
    output:
        answer="results/smoke/{model}.parquet",
        calls="results/smoke/{model}.calls.parquet",
    log:
        "logs/smoke/{model}.log",
    conda:
        CONDA_ENV
    resources:
        api=1,
    params:
        endpoint=lambda wc: get_endpoint_params(wc.model),
        question=config["smoke"]["question"],
        max_tokens=config["smoke"]["max_tokens"],
    script:
        "../scripts/smoke.py"


if config["smoke"]["enabled"]:
    FINAL_TARGETS.extend(expand("results/smoke/{model}.parquet", model=PANEL))
