"""The playbook study's baselines by name (issue 10): label, how variants combine, what each
may see; the prompt files they read.  Constants only, so that the workflow's checks and wildcards, which run when Snakemake
parses the Snakefile, need not import the baselines' code (:mod:`.baselines` pulls in
scikit-learn and SciPy: about 2.3 s of every ``snakemake`` start, dry runs included)."""

from __future__ import annotations

#: Every baseline: how its variants' scores combine (``mean``: over orders and runs;
#: ``best``: the best variant on the evaluation tasks; ``full``: the variants are the
#: subsampled rounds of Table 17, the score is the whole round's) and what it was allowed to see.
PRACTICE, EVALUATION = "practice only", "evaluation tasks (tuned on evaluation)"
METHODS: dict[str, tuple[str, str, str]] = {  # key -> (label, combine, allowed to see)
    "random": ("Random", "mean", PRACTICE),
    "own": ("Own", "mean", PRACTICE),
    "top_k": ("Top-k", "mean", PRACTICE),
    "tags_star": ("Tags*", "best", EVALUATION),
    "topk_star": ("Top-k*", "best", EVALUATION),
    "dc_self": ("DC_self", "mean", PRACTICE),
    "dc_outcome": ("DC_outcome", "mean", PRACTICE),
    "dgmem": ("DG-Mem", "mean", PRACTICE),
    "pooled": ("Pooled", "mean", PRACTICE),
    "best_full_cut": ("Best-Full cut", "mean", PRACTICE),
    "all_positive": ("All-positive (no cap)", "mean", PRACTICE),
    "judge": ("Judge-based RBC-cut", "mean", PRACTICE),
    "subsampled": ("RBC-cut, subsampled rounds", "full", PRACTICE),
}

#: The prompt files of Dynamic Cheatsheet's selection and of the judge-based baseline (``playbook.baselines.prompts_dir``).
DC_PROMPT_FILES = ("dc_select_system.txt", "dc_select_user.txt")
JUDGE_PROMPT_FILES = ("judge_goal_system.txt", "judge_goal_user.txt")
BASELINE_PROMPTS_KEY = "playbook.baselines.prompts_dir"
"""The config key naming their folder (a missing file's error says to fix it)."""
