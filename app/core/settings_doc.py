"""docs/settings.md, rendered from the fields of `CourseEnv` (`python -m app settings-doc`; a test checks it)."""

from __future__ import annotations

from pydantic.fields import FieldInfo

from app.core.config import CourseEnv, allowed


def _shown_default(info: FieldInfo) -> str:
    if info.default is None or info.default == "":
        return "unset"
    if isinstance(info.default, bool):
        return "on" if info.default else "off"
    return f"`{info.default}`"


SETTINGS_DOC = "docs/settings.md"


def settings_markdown() -> str:
    """docs/settings.md: the table of every variable `CourseEnv` reads, rendered from its fields."""
    rows = [
        f"| `{info.alias}` | {_shown_default(info)} | {allowed(info)} | {info.description} |"
        for info in CourseEnv.model_fields.values()
    ]
    return "\n".join(
        [
            "# Settings",
            "",
            "<!-- Generated from app/core/config.py by `python -m app settings-doc`; edit the model, not this file. -->",
            "",
            "Every setting is an environment variable; unset or empty means the default. A value outside what",
            "a variable accepts stops `python -m app` before anything starts, with one line naming it:",
            "`configuration error: COURSE_WORKERS: got 99, expected a whole number from 0 to 8` (exit status 2).",
            "",
            "| variable | default | accepts | what it sets |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            "Variables read by other programs (Ray's `RAY_AUTH_MODE` and `RAY_AUTH_TOKEN`) and by a Ray lab host",
            "alone (`COURSE_NODE_DATA_DIR`) are in [deploying.md](deploying.md). uvicorn's own `FORWARDED_ALLOW_IPS` is",
            "not read: `COURSE_FORWARDED_ALLOW_IPS` above names the proxies.",
            "",
        ]
    )
