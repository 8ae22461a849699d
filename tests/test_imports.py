"""Import structure of the package, read statically (memtrials.pipeline.codesets): no import cycle
anywhere (lazy imports inside functions included), layers below never import a study, no
study imports another, and the lowest modules stay low."""

from __future__ import annotations

import pytest

from memtrials.pipeline import codesets as sources


def test_no_import_cycle_in_the_package():
    graph = sources.import_graph()
    assert len(graph) > 50  # the whole package was read
    graph = {m: set(d) for m, d in graph.items()}
    cycles = []
    while (cycle := sources.find_cycle(graph)) is not None and len(cycles) < 20:
        cycles.append(" -> ".join(cycle))
        graph[cycle[0]].discard(cycle[1])  # cut it to find the next one
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_cycle_finder_finds_a_planted_cycle():
    assert sources.find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    cycle = sources.find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    # the real graph with one reversed edge planted has a cycle
    graph = {m: set(d) for m, d in sources.import_graph().items()}
    graph["memtrials.envs.alfworld.planner"].add("memtrials.envs.alfworld.env")
    assert sources.find_cycle(graph) is not None


def test_imports_are_resolved_statically():
    alf = sources.imports("memtrials.envs.alfworld.env")
    assert "memtrials.envs.alfworld.planner" in alf  # an import inside a method counts
    assert "memtrials.envs.base" in alf
    assert "memtrials.io" in sources.imports("memtrials.envs.tasks")
    assert "memtrials.envs.alfworld.scenes" in sources.imports("memtrials.envs.alfworld.solve")  # from P import sub
    with pytest.raises(ModuleNotFoundError):
        sources.imports("memtrials.nowhere")


def test_type_checking_imports_do_not_count():
    import ast

    tree = ast.parse("from typing import TYPE_CHECKING\nimport typing\n"
                     "if TYPE_CHECKING:\n    import memtrials.a\nelse:\n    import memtrials.b\n"
                     "if typing.TYPE_CHECKING:\n    import memtrials.c\n"
                     "def f():\n    import memtrials.d\n")
    names = {a.name for n in sources._nodes(tree) if isinstance(n, ast.Import) for a in n.names}
    assert names == {"typing", "memtrials.b", "memtrials.d"}


def _studies(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" else None


TOP = ("memtrials.__main__",)
"""Above every study, like the rule files: the command line (``config check`` builds every
study's workflow helper to run its checks before any job).  Nothing imports it."""


def test_layers_never_import_a_study_and_studies_not_each_other():
    bad = []
    graph = sources.import_graph()
    for module, deps in graph.items():
        bad += [f"{module} -> {top}" for top in TOP if top in deps]
        if module in TOP:
            continue
        mine = _studies(module)
        for dep in deps:
            theirs = _studies(dep)
            if theirs is not None and theirs != mine:
                bad.append(f"{module} -> {dep}")
    assert not bad, bad


@pytest.mark.parametrize("module,forbidden", [
    ("memtrials.io", ("memtrials",)),
    ("memtrials.pipeline.codesets", ("memtrials",)),
    ("memtrials.envs.tasks", ("memtrials.llm", "memtrials.agent", "memtrials.studies")),
    ("memtrials.envs.build", ("memtrials.llm", "memtrials.agent", "memtrials.studies")),
])
def test_low_modules_stay_low(module, forbidden):
    below = sources.closure([module])
    reached = [m for m in below if m != module and any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not reached, f"{module} reaches {reached}"


@pytest.mark.parametrize("module, heavy", [
    ("memtrials.llm.client", ("openai", "aiohttp")),
    ("memtrials.llm.embed", ("openai", "aiohttp")),
    ("memtrials.llm.token_count", ("openai", "aiohttp")),
    ("memtrials.memory.antipersist", ("openai", "aiohttp", "scipy")),
    ("memtrials.stats", ("scipy",)),
    # what the Snakefile imports when Snakemake parses it (every run and dry run pays it)
    ("memtrials.studies.playbook.workflow", ("scipy", "sklearn")),
    ("memtrials.llm.check", ("openai", "httpx")),  # the run's preflight (onstart)
])
def test_what_a_fully_cached_job_imports_stays_light(module, heavy):
    """Modules on a fully cached job's path load no SDK (it is imported on a cell's first fresh
    call) and the anti-persistence memory no SciPy: each cost a job about 0.7-1.3 CPU-s (py-spy
    on a cached rerun, 3 December)."""
    import subprocess
    import sys

    code = f"import sys, {module}; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"


def test_reading_every_listed_name_of_envs_loads_no_engine_nor_pandas():
    """AppWorld's clock freeze (freezegun) reads every attribute ``dir()`` lists of every loaded
    module; listing ``memtrials.envs``'s lazy names there imported pandas inside AppWorld's frozen
    clock and overflowed the C stack of its verification workers (5 December)."""
    import subprocess
    import sys

    code = ("import sys, memtrials.envs as m\n"
            "[getattr(m, n) for n in dir(m)]\n"
            "assert 'pandas' not in sys.modules, 'dir(memtrials.envs) led to importing pandas'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
