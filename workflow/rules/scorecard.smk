# The scorecard (issue 39; README, "The scorecard"): after a run, one page per
# panel endpoint with each registered study's headline quantity and its interval (each study's
# own headline function, through the study interface: memtrials.pipeline.study.Study.headline_plan)
# and the run's cost there, from every job's call records and the cache ledger.  A study
# that is off, or whose design leaves the endpoint or an arm out, shows "not run" and why.
# The rule only gathers (memtrials.pipeline.scorecard); no study imports another.

from memtrials.pipeline.scorecard import rule_inputs as scorecard_inputs  # noqa: E402

SCORECARD_STUDIES = [study(name) for name in study_names()]


rule scorecard:
    input:
        # every job's calls file (the cost) and each study's headline inputs for this endpoint
        unpack(
            lambda wc: scorecard_inputs(
                SCORECARD_STUDIES,
                wc.model,
                (
                    expand("results/smoke/{model}.calls.parquet", model=PANEL)
                    if config["smoke"]["enabled"]
                    else []
                ),
            )
        ),
        code=sorted(
            {
                f
                for s in SCORECARD_STUDIES
                if s.headline_quantities
                for f in s.headline_code()
            }
        ),
    output:
        md="results/scorecard/{model}.md",
        html=report(
            "results/scorecard/{model}.html",
            caption="../report/scorecard.rst",
            category="Scorecard",
            subcategory="Endpoints",
            labels={"endpoint": "{model}"},
        ),
    log:
        "logs/scorecard/{model}.log",
    conda:
        CONDA_ENV
    params:
        plans=lambda wc: [s.headline_plan(wc.model) for s in SCORECARD_STUDIES],
        cache=config["cache"],
    script:
        "../scripts/scorecard.py"


if config["scorecard"]["enabled"]:
    FINAL_TARGETS.extend(
        expand("results/scorecard/{model}.{ext}", model=PANEL, ext=("md", "html"))
    )
