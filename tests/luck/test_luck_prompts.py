"""The luck study's prompt files are protocol: their bytes are pinned by SHA-256.

Change a file only on purpose: update the digest here, say why in the commit, and
re-freeze the study (docs/luck.md).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from memtrials.studies.luck.prompts import PROMPT_FILES, PromptSet, answer_schema
from memtrials.studies.luck.worlds import generate_worlds

PROMPTS = Path(__file__).resolve().parents[2] / "config" / "prompts" / "luck"

EXPECTED_SHA256 = {
    "choice_bad.txt": "a8f665eefecae2ebda040020d15463844d7ff4b9c8fa4a5b5906b77c44a3c8fa",
    "choice_good.txt": "bfca99203bfc087daa69b46e270b97dc702bc771be7e47a1409651731995ef8b",
    "cue_explicit.txt": "82fbff0c1b808bcbc3c9f40ad0402167cecb9a5b1b1ab813c2f94dfc5b06a748",
    "memory_neutral.txt": "82f662a71d6eeacee6aa151f78e7bfff18b510d10966cf3d785de39a15ef335c",
    "memory_planted.txt": "8af3b2c9ba785bc2d13bc9db58193e75c88f27dfaf4342ada875eeae92884df2",
    "observation_failure.txt": "6d615e79675ab4ed6334aa2bd6d88f0ead301ac6f3de75058916be689a42d3ca",
    "previous_failure.txt": "cf51d95dae11bc7ecce96ad122273a9cabdf1d75b809d2e3f65bf665ffe1ff9f",
    "previous_success.txt": "7a10e7669742682a1afaddefa80a59e0ded6e26787cde047e99386a2a995b3ff",
    "reader_system.txt": "f5e413568f0e40eec0494cfa7c7f512a0c2b8a01b0cad31b8417a6f35fc97b07",
    "reader_user.txt": "5a909cbfc381c3a61f8478366df5a7ada35dd450e3fe8bfdf064d2bbfb2cfff8",
    "run_log.txt": "3f1711229fd711fdf804c2315f2e4d612679794ee9501a4663a7f3757fa6e1cd",
    "trajectory.txt": "5cbdfd32901447d09636a339b8c49c5777b18d3ac8fd4a7a81195fc167cb7b93",
    "writer_user.txt": "63a57ed703bb132d4ec918b2b05b1cfa333bf5f96a3d2a971418afa854c7185b",
    "writer_n.md": "b2e8b4ba1e6e5e4003f55c581dab590ac7245b58b588b194f3a919bdbef757e8",
    "writer_rb_failure.md": "a15621c72102e37cf17e48825e99a61cdd624248d053e27fdd2e0fc4794078b1",
    "writer_rb_success.md": "c3f035c8d6613a1ed3815a34806e824dc0b624f403aee5872560c7d205bc3869",
    "writer_rbd_failure.md": "b0068f9e83c5412901100fb3c05da5f4c1d0fb5099f3f952e33b1e7f8ff93073",
    "writer_rbd_success.md": "431b9137be2078f8b9cf19be9f4d77769ea0249079920c235175234dd6863687",
}

# Paper, Appendix A: the failure instruction as sent, with every whitespace removed
# (the paper's text copy lost its spaces; markdown escapes removed).
APPENDIX_A_FAILURE_NO_SPACE = (
    'Youareanexpertinrunningoperationaltasks.Youwillbegivenauserquery,thecorrespondin'
    'gtrajectorythatrepresents**howanagentattemptedtoresolvethetaskbutfailed**.##Guid'
    'elinesYouneedtoextractandsummarizeusefulinsightsintheformatofmemoryitemsbasedont'
    "heagent'sfailedtrajectory.Thegoalofsummarizedmemoryitemsistobehelpfulandgenerali"
    'zableforfuturesimilartasks.##Importantnotes-Youmustfirstreflectandthinkwhythetra'
    'jectoryfailed,andthensummarizewhatlessonsyouhavelearnedorstrategiestopreventthef'
    'ailureinthefuture.-Youcanextract*atmost3*memoryitemsfromthetrajectory.-Youmustno'
    'trepeatsimilaroroverlappingitems.-Preferconcrete,actionablerecoveryproceduresove'
    'rabstractprinciples.Donotembedspecificqueriesorliteralstringcontentsfromthetask,'
    'butyoumaynamethetools.##OutputFormatYouroutputmuststrictlyfollowtheMarkdownforma'
    'tshownbelow:```#MemoryItemi##Title<thetitleofthememoryitem>##Description<onesent'
    'encesummarydescribingwhenorwhenNOTtousethememoryitem>##Content<1-3sentencesdescr'
    'ibingtheinsightslearnedtoavoidsuchfailuresandsuccessfullyaccomplishingsimilartas'
    'ksinthefuture>'
)


def test_every_prompt_file_is_pinned():
    assert sorted(EXPECTED_SHA256) == sorted(PROMPT_FILES)
    for name, digest in EXPECTED_SHA256.items():
        got = hashlib.sha256((PROMPTS / name).read_bytes()).hexdigest()
        assert got == digest, f"{name} changed: SHA-256 {got}"


def test_sources_named():
    text = (PROMPTS / "SOURCES.md").read_text()
    assert "google-research/reasoning-bank" in text and "Apache License 2.0" in text
    for name in PROMPT_FILES:
        assert name in text, f"SOURCES.md does not name {name}"


def test_failure_instruction_matches_appendix_a():
    mine = re.sub(r"\s+", "", (PROMPTS / "writer_rb_failure.md").read_text())
    # the paper's listing stops before the closing code fence
    assert mine.removesuffix("```") == APPENDIX_A_FAILURE_NO_SPACE


def test_rendered_instructions_differ_only_where_declared():
    p = PromptSet.load(PROMPTS)
    s, f = p.writer_instruction("RB", "success"), p.writer_instruction("RB", "failure")
    bullet = "  - Before writing, judge whether the agent's decision was sound"
    for base, outcome in ((s, "success"), (f, "failure")):
        rbd = p.writer_instruction("RBD", outcome).splitlines()
        added = [ln for ln in rbd if ln not in base.splitlines()]
        assert len(added) == 1 and added[0].startswith(bullet) and added[0].count(". ") == 2
        # the first bullet under "Important notes"
        assert rbd[rbd.index("## Important notes") + 1] == added[0]
        assert [ln for ln in rbd if ln != added[0]] == base.splitlines()
    n = p.writer_instruction("N", "failure")
    assert n == p.writer_instruction("N", "success")
    assert "If nothing about how the task should be done needs to change, say so." in n
    assert "success" not in n and "fail" not in n
    for text in (s, f, n):
        assert "running operational tasks" in text and "web navigation" not in text
        assert "but you may name the tools." in text and "product names" not in text


def test_reader_prompt_has_every_registered_part():
    p = PromptSet.load(PROMPTS)
    for w in generate_worlds(3, n_domains=2, worlds_per_domain=4):
        for outcome in ("success", "failure"):
            sys_msg, user = p.reader_messages(w, "good", outcome, p.neutral_memory(w))
            assert sys_msg["content"].startswith("You are an operations agent")
            u = user["content"]
            assert "(both operational today)" in u and "authoritative; stable for months" in u
            assert ("independent one-off events" in u) == (w.cue == "explicit")
            assert f"{w.better_tool} was used and it " + ("succeeded." if outcome == "success" else "failed") in u
            assert "The previous run is finished and will not be repeated." in u
            assert u.rstrip().endswith("Reply in JSON with the tool's name and a one-sentence reason.")
            assert u.index(w.tools[0]) < u.index(w.tools[1])
        schema = answer_schema(w)
        assert schema["properties"]["first_tool"]["enum"] == list(w.tools)


def test_writer_runs_differ_only_in_decision_and_outcome():
    p = PromptSet.load(PROMPTS)
    w = generate_worlds(5, n_domains=1, worlds_per_domain=4)[0]
    good = p.trajectory(w, "good", "failure")
    bad = p.trajectory(w, "bad", "failure")
    assert "the more reliable tool" in good and "the more reliable tool" not in bad
    assert "this run allows no retry" in good
    assert "this run allows no retry" not in p.trajectory(w, "good", "success")
    assert good.count("Step ") == 3


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="writer_n.md"):
        for f in PROMPT_FILES[:4]:
            (tmp_path / f).write_text("x")
        PromptSet.load(tmp_path)
