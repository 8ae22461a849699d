"""Load and validate the pipeline config and the model registry (the package's public face).

Both files are checked against the JSON schemas in ``config/schemas/``, then against the
cross-file rules a schema cannot state; every failure is a :class:`ConfigError` whose
message names the file, the key and the fix.  The work is split by concern:

- :mod:`~memtrials.config.errors`: :class:`ConfigError` and ``REPO_ROOT``;
- :mod:`~memtrials.config.load`: the YAML/JSON loader that refuses duplicate keys, overlays, :func:`merge`;
- :mod:`~memtrials.config.sources`: which file of a merged config set a key (:class:`Sources`);
- :mod:`~memtrials.config.keys`: an API key pasted into ``api_key_env`` (never printed);
- :mod:`~memtrials.config.schema`: JSON-schema validation and its messages;
- :mod:`~memtrials.config.models`: the model registry (:class:`Endpoint`, :func:`load_models`);
- :mod:`~memtrials.config.checks`: the checks of a whole config (:func:`check_config`);
- :mod:`~memtrials.config.prompts`: the one prompt loader.

The names below are re-exported so that ``from memtrials.config import X`` is the way in.
"""

from __future__ import annotations

from memtrials.config.checks import check_cache_path, check_config, check_layers, load_config
from memtrials.config.errors import REPO_ROOT, ConfigError
from memtrials.config.keys import key_shape
from memtrials.config.load import (
    DuplicateKeyError, UniqueKeyLoader, check_config_files, load_overlay, load_yaml, merge,
)
from memtrials.config.models import EmbeddedWeights, Endpoint, PlantedPolicy, Price, load_models, parse_models
from memtrials.config.schema import SCHEMA_DIR, load_schema, validate
from memtrials.config.sources import CLI_CONFIG, Sources, config_sources, key_source

__all__ = [
    "CLI_CONFIG", "REPO_ROOT", "SCHEMA_DIR", "ConfigError", "DuplicateKeyError", "EmbeddedWeights", "Endpoint", "PlantedPolicy", "Price",
    "Sources", "UniqueKeyLoader", "check_cache_path", "check_config", "check_config_files", "check_layers",
    "config_sources", "key_shape", "key_source", "load_config", "load_models", "load_overlay", "load_schema",
    "load_yaml", "merge", "parse_models", "validate",
]
