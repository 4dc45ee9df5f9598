"""The JSON API's OpenAPI document (/api/v1/openapi.json), complete enough to generate a client from.

    install(app, labs)   the app's `openapi()`: FastAPI's document, plus what FastAPI cannot see

FastAPI builds the paths and models from the routes. Two things it cannot see are added here, once, when the
document is first asked for:
- how scripts authenticate: an `Authorization: Bearer` API token (the check is app/web/deps.py's, done by hand),
  so the docs page offers "Authorize" and its "Try it out" calls carry the token;
- what a refusal answers (app/web/problems.py): FastAPI's own 422 model is not what this app sends, so every
  operation that takes inputs documents `Refusal` for 422, and every one `Problem` for 401 (and 404 where its path
  names something);
- the body of POST /api/v1/jobs per lab: the route reads a loose `JobIn` and the job service validates each lab's
  parameters, so the document replaces `JobIn` with the union of one model per lab of the catalog the app was
  built with (app/web/routes/api.py `job_request_models`), keyed by `lab`.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from typing import Annotated, Any, Union

from fastapi import FastAPI
from pydantic import Field, TypeAdapter

from app.web.problems import Problem, Refusal
from app.web.routes.api import JobIn, job_request_models
from labs import catalog

TITLE = "Parallel Horizons"
DESCRIPTION = (
    "The course's JSON API for scripts: submit a lab job and read its status, result and files; upload a bundle "
    "from `python -m labs run`; run the interactive lesson's calculators. Authenticate with an API token from "
    "your Account page (`Authorization: Bearer <token>`), or with the browser's login cookie plus the "
    "`X-CSRF-Token` header on changes (GET /api/v1/me returns it)."
)
COMPONENTS = "#/components/schemas/{model}"


def version() -> str:
    """The course's version, as its package is installed (a checkout run without installing says so)."""
    try:
        return metadata.version("gpu-course")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def job_request_schema(specs: Iterable[catalog.LabSpec]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job request as one schema per lab keyed by `lab`: (the union, the schemas it refers to by name)."""
    models = job_request_models(specs)
    if len(models) == 1:  # a union of one is that model, and has nothing to discriminate
        union: Any = models[0]
    else:
        union = Annotated[Union[tuple(models)], Field(discriminator="lab")]  # noqa: UP007 (a tuple of models)
    schema = TypeAdapter(union).json_schema(ref_template=COMPONENTS)
    named = schema.pop("$defs", {})
    if len(models) == 1:
        named[models[0].__name__], schema = schema, {"$ref": COMPONENTS.format(model=models[0].__name__)}
    return schema, named


def install(app: FastAPI, labs: Iterable[catalog.LabSpec]) -> None:
    """Make `app.openapi()` publish the complete document, for the labs of `labs` (read now, at app creation)."""
    specs = list(labs)
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()  # FastAPI caches it in app.openapi_schema; this adds to that same dict once
        components = document.setdefault("components", {})
        components["securitySchemes"] = {
            "token": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API token from your Account page. It acts as you, the learner, whatever your "
                "account's roles: your own jobs, results, artifacts and uploads only (anyone else's answer 404).",
            }
        }
        document["security"] = [{"token": []}]
        schemas = components.setdefault("schemas", {})
        union, named = job_request_schema(specs)
        _add(schemas, named)
        schemas[JobIn.__name__] = {**union, "title": "JobIn", "description": "A lab job to queue, by lab."}
        _document_refusals(document)
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _add(schemas: dict[str, Any], named: dict[str, Any]) -> None:
    clash = sorted(name for name, schema in named.items() if schemas.get(name, schema) != schema)
    if clash:
        raise RuntimeError(f"the API's models reuse names for different schemas: {', '.join(clash)}")
    schemas.update(named)


def _answer(model: type[Problem], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": COMPONENTS.format(model=model.__name__)}}},
    }


def _document_refusals(document: dict[str, Any]) -> None:
    """The refusals every operation may answer, in the shapes this app sends them."""
    schemas = document["components"]["schemas"]
    for model in (Problem, Refusal):
        schema = model.model_json_schema(ref_template=COMPONENTS)
        _add(schemas, {**schema.pop("$defs", {}), model.__name__: schema})
    for path, operations in document["paths"].items():
        for op in operations.values():
            answers = op.setdefault("responses", {})
            if op.get("parameters") or op.get("requestBody"):
                answers["422"] = _answer(Refusal, "Inputs refused, each named in `errors`; nothing was changed")
            answers.setdefault("401", _answer(Problem, "Not logged in, or the API token is unknown or revoked"))
            if "{" in path:
                answers.setdefault("404", _answer(Problem, "Not found, or not yours to see"))
    for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 models, replaced above
        schemas.pop(unused, None)
