"""Rule env_appworld_data: build the offline AppWorld task set (see workflow/rules/envs.smk).

The build saves and verifies tasks in spawned worker processes, which import this file again as
``__mp_main__``: the guard keeps them from running the rule (and from needing the
``snakemake`` object, which only the rule's own process has)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(globals().get("snakemake"), __file__)  # (run in the warm job server; workers: no snakemake, no-op)

from memtrials.envs.build import build_appworld
from memtrials.pipeline.rule_entry import run_rule

if __name__ == "__main__":
    s = snakemake  # noqa: F821
    run_rule(s, lambda: build_appworld(envs_cfg=s.params.envs, data_dir=s.output.data, manifest=s.output.manifest,
                                       workers=int(s.threads), verified=s.input.verified))
