# MemTrials: reproduce the four history/memory studies from one command.
#   snakemake --cores all                      # default config (embedded model)
#   snakemake --cores all --configfile config/presets/<preset>.yaml
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/smoke.smk"
include: "workflow/rules/luck.smk"
include: "workflow/rules/history.smk"
include: "workflow/rules/envs.smk"
include: "workflow/rules/antipersist.smk"
include: "workflow/rules/calibrator.smk"
include: "workflow/rules/playbook.smk"


onstart:
    preflight_check()


onsuccess:
    stop_shared_servers()


onerror:
    stop_shared_servers()


rule all:
    default_target: True
    input:
        get_final_output,
