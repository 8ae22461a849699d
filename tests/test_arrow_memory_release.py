"""What a job's writes free goes back to the system (issue 39, "Paper scale": memory flat in
episodes per job).

Arrow's allocator (mimalloc in the wheels) kept what each chunk of a chunked write freed, so a
job's resident memory after writing its call records grew with their chunks (1x: +40 MB, 4x: +50 MB
in bench_scale's job).  :func:`memtrials.io.release_arrow_memory` after each chunk and each write
hands it back.  Measured in subprocesses, each against itself with the release made a no-op: the
memory a write leaves resident must be well under what it leaves without the release; the bytes
written are the same either way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from memtrials import io as mio

SCRIPT = textwrap.dedent("""
    import json, random, sys
    import pyarrow as pa
    import memtrials.agent.records as arec
    import memtrials.io as mio
    import memtrials.llm.records as rec
    from memtrials.agent.records import STEP_SCHEMA, table_in_chunks
    from memtrials.llm.records import FIELDS, Recorder
    what, keep, folder = sys.argv[1], sys.argv[2] == "keep", sys.argv[3]
    if keep:  # the control: the allocator keeps what was freed, as before the release
        for module in (mio, rec, arec):
            module.release_arrow_memory = lambda: None

    def resident_mb():
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096 / 2**20

    rng = random.Random(0)
    words = [f"w{k}" for k in range(20000)]
    mio.write_parquet(pa.table({"a": ["x" * 3000] * 10}), folder + "/warm.parquet")  # Parquet's code, loaded
    if what == "calls":  # 4 chunks of ALFWorld-sized call records (~3 KB a prompt)
        r = Recorder("big", folder + "/out.parquet", folder + "/journal")
        for i in range(4 * rec.CHUNK):
            x = {k: None for k in FIELDS}
            x.update(call_id=f"{i:024d}", cell_id="big", params="{}", response_text=f"go to {i}",
                     messages=json.dumps([{"role": "user", "content": " ".join(rng.choices(words, k=500))}]))
            r.add(x)
        before = resident_mb()
        r.write()
        r.close()
    else:  # a step table of 4 chunks of rows (~1 KB each), built and written as write_episodes does
        rows = [{n: None for n in STEP_SCHEMA.names} | {"observation": " ".join(rng.choices(words, k=150)),
                 "shown_actions": json.dumps(rng.choices(words, k=60)), "step": i} for i in range(4 * arec.CHUNK_ROWS)]
        before = resident_mb()
        mio.write_parquet(table_in_chunks(iter(rows), STEP_SCHEMA), folder + "/out.parquet")
    print(json.dumps({"left_mb": resident_mb() - before}))
""")


def run(what: str, keep: bool, folder: Path) -> tuple[float, bytes]:
    folder.mkdir()
    src = str(Path(mio.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", SCRIPT, what, "keep" if keep else "release", str(folder)],
                          capture_output=True, text=True, env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(done.stdout.splitlines()[-1])["left_mb"], (folder / "out.parquet").read_bytes()


def check(what: str, tmp_path: Path) -> None:
    kept, kept_bytes = run(what, True, tmp_path / "keep")
    released, released_bytes = run(what, False, tmp_path / "release")
    assert released_bytes == kept_bytes  # the release touches no value written
    assert released < 0.5 * kept, (released, kept)


def test_writing_call_records_a_chunk_at_a_time_leaves_no_chunk_behind(tmp_path):
    check("calls", tmp_path)


def test_writing_a_step_table_built_in_chunks_leaves_its_buffers_behind_no_longer(tmp_path):
    check("steps", tmp_path)
