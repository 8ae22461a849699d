"""The playbook study's baselines by name (issue 10): label, how variants combine, what each
may see; the prompt files they read.  Constants only, so that the workflow's checks and wildcards, which run when Snakemake
parses the Snakefile, need not import the baselines' code (:mod:`.baselines` pulls in
scikit-learn and SciPy: about 2.3 s of every ``snakemake`` start, dry runs included)."""

from __future__ import annotations

#: Every baseline: how its variants' scores combine (``mean``: over orders and runs;
#: ``best``: the best variant on the evaluation tasks; ``full``: the variants are the
#: subsampled rounds of Table 17, the score is the whole round's) and what it was allowed to see.
PRACTICE, EVALUATION = "practice only", "evaluation tasks (tuned on evaluation)"
_LABELS = {  # key -> label, in the tables' order
    "random": "Random", "own": "Own", "top_k": "Top-k", "tags_star": "Tags*", "topk_star": "Top-k*",
    "dc_self": "DC_self", "dc_outcome": "DC_outcome", "dgmem": "DG-Mem", "pooled": "Pooled",
    "best_full_cut": "Best-Full cut", "all_positive": "All-positive (no cap)", "judge": "Judge-based RBC-cut",
    "judge_other": "Judge-based RBC-cut (another model)",
    "subsampled": "RBC-cut, subsampled rounds",
}
_TUNED_ON_EVALUATION = ("tags_star", "topk_star")  # the best variant on the evaluation tasks; every other: mean
METHODS: dict[str, tuple[str, str, str]] = {  # key -> (label, combine, allowed to see)
    k: (label, "full" if k == "subsampled" else "best" if k in _TUNED_ON_EVALUATION else "mean",
        EVALUATION if k in _TUNED_ON_EVALUATION else PRACTICE)
    for k, label in _LABELS.items()
}

#: The prompt files of Dynamic Cheatsheet's selection and of the judge-based baseline (``playbook.baselines.prompts_dir``).
DC_PROMPT_FILES = ("dc_select_system.txt", "dc_select_user.txt")
JUDGE_PROMPT_FILES = ("judge_goal_system.txt", "judge_goal_user.txt")
BASELINE_PROMPTS_KEY = "playbook.baselines.prompts_dir"
"""The config key naming their folder (a missing file's error says to fix it)."""
