"""Standalone lab runners for the course (imports nothing from `app`).

Every lab is a module with a `Params` model and a `run(params, ctx)` function; the command
line in `labs.cli` wraps them with parameter validation, backend selection, progress lines,
and a `result.json` validated against `labs/schema/result.schema.json`.

    python -m labs probe
    python -m labs run env-check --params '{}' --out /tmp/env
"""

SCHEMA_VERSION = 1
