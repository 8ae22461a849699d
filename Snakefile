# MemTrials: reproduce the four history/memory studies from one command.
#   snakemake --cores all                      # default config (embedded model)
#   snakemake --cores all --configfile config/presets/<preset>.yaml
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/smoke.smk"
include: "workflow/rules/envs.smk"


# every registered study (memtrials.studies.STUDIES): its rules file, then its final targets
for study_name in study_names():

    include: f"workflow/rules/{study_name}.smk"

    enable_study(study(study_name))


# after every study: the section gathering their planted tables (KNOWN_ANSWER_TABLES)
include: "workflow/rules/known_answer.smk"
# after a run: each study's headline and the run's cost, per panel endpoint
include: "workflow/rules/scorecard.smk"


onstart:
    preflight_check()
    hold_shared_servers()


onsuccess:
    stop_shared_servers()


onerror:
    stop_shared_servers()


rule all:
    default_target: True
    input:
        get_final_output,
