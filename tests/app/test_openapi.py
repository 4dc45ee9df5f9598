"""The API describes itself: /api/v1/openapi.json names the product, gives each operation a readable id, documents
a job's parameters per lab (a union keyed by `lab`, from the catalog the app was built with) and each calculator's
inputs, and /docs leads to the page that renders it."""

from __future__ import annotations

import dataclasses
import re

import pytest
from jsonschema import Draft202012Validator

from app.content.tools import TOOLS
from app.web.factory import create_app
from labs import catalog


@pytest.fixture(scope="module")
def document() -> dict:
    """The document of an app made from the catalog as it is (building it touches no database)."""
    from app.core.config import Settings

    return create_app(Settings.from_env({"COURSE_ENV": "test"}), prepare=False).openapi()


def _validator(document: dict, name: str) -> Draft202012Validator:
    """A JSON Schema validator for the component `name`, resolving its references inside the document."""
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": document["components"]})


def test_the_document_names_the_product_and_its_operations_read_as_words(document):
    assert document["info"]["title"] == "Parallel Horizons"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", document["info"]["version"])
    operations = [op for path in document["paths"].values() for op in path.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids)) and len(ids) >= 16
    for op in operations:
        assert re.fullmatch(r"[a-z]+(_[a-z0-9]+)*", op["operationId"]) and "api_v1" not in op["operationId"]
        assert op["summary"][0].isupper() and not op["summary"].startswith("Api "), op["summary"]
        assert op["tags"] and op["tags"][0] in {"account", "labs", "jobs", "bundles", "tools", "charts"}
    submit = document["paths"]["/api/v1/jobs"]["post"]
    assert (submit["operationId"], submit["summary"]) == ("submit_job", "Submit a lab job")
    assert document["security"] == [{"token": []}]


def test_a_jobs_params_are_a_union_of_the_labs_keyed_by_lab(document):
    schemas = document["components"]["schemas"]
    body = document["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/JobIn"}
    union = schemas["JobIn"]
    assert union["discriminator"]["propertyName"] == "lab"
    mapping = union["discriminator"]["mapping"]
    assert sorted(mapping) == sorted(catalog.names())
    assert len(union["oneOf"]) == len(catalog.LABS)
    for name, ref in mapping.items():
        variant = schemas[ref.rsplit("/", 1)[1]]
        assert variant["properties"]["lab"]["const"] == name and "lab" in variant["required"]
        assert variant["additionalProperties"] is False
        params = schemas[variant["properties"]["params"]["$ref"].rsplit("/", 1)[1]]
        own = catalog.get(name).params.model_json_schema()
        assert params["properties"] == own["properties"]  # the lab's own model, field for field
        assert params.get("additionalProperties") is False


def test_the_union_accepts_what_the_labs_accept_and_names_what_they_refuse(document):
    jobs = _validator(document, "JobIn")
    for spec in catalog.LABS.values():
        assert jobs.is_valid({"lab": spec.name}), spec.name  # every field has a default
        for preset in spec.presets:
            assert jobs.is_valid({"lab": spec.name, "params": dict(preset.params), "backend": "cpu"}), preset.name
    refused = list(jobs.iter_errors({"lab": "fp8-step", "params": {"steps": 4, "oops": 1}}))
    assert refused and any("oops" in e.message for e in refused)
    assert not jobs.is_valid({"lab": "fp8-step", "params": {"steps": -1}})
    assert not jobs.is_valid({"lab": "no-such-lab"})
    assert not jobs.is_valid({"lab": "env-check", "backend": "quantum"})


def test_the_union_is_built_from_the_catalog_when_the_app_is_made(settings, monkeypatch):
    """A lab the catalog holds when the app is made is in that app's document, with no list of names to edit."""
    scratch = dataclasses.replace(catalog.get("fp8-step"), name="scratch-lab", title="A lab made up for this test")
    monkeypatch.setitem(catalog.LABS, "scratch-lab", scratch)
    schemas = create_app(settings, prepare=False).openapi()["components"]["schemas"]
    mapping = schemas["JobIn"]["discriminator"]["mapping"]
    assert mapping["scratch-lab"] == "#/components/schemas/ScratchLabJob"
    assert schemas["ScratchLabJob"]["description"] == "A run of the scratch-lab lab: A lab made up for this test."
    assert schemas["ScratchLabParams"]["properties"] == schemas["Fp8StepParams"]["properties"]


@pytest.mark.parametrize("tool", list(TOOLS.values()), ids=lambda t: t.name)
def test_each_calculators_inputs_are_its_query_parameters(document, tool):
    op = document["paths"][f"/api/v1/tools/{tool.name}"]["get"]
    params = {p["name"]: p for p in op["parameters"] if p["in"] == "query"}
    inputs = tool.model.model_json_schema()["properties"]
    assert set(params) == set(inputs) | {"predicts", "predict"}
    for name, schema in inputs.items():
        assert params[name]["schema"] == schema and params[name]["required"] is False
    assert params["predicts"]["schema"]["enum"] == list(tool.outputs)
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ToolAnswer"
    }
    assert "/api/v1/tools/{tool}" not in document["paths"]  # the catch-all only answers unknown names (404)


def test_docs_lead_to_the_api_docs_and_bad_params_still_name_the_field(client):
    r = client.get("/docs", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/api/v1/docs"
    page = client.get("/docs")
    assert page.status_code == 200 and 'data-openapi="/api/v1/openapi.json"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]  # the vendored UI, no inline script
    client.register("ann@example.org")
    headers = {"X-CSRF-Token": client.api_token()}
    r = client.post("/api/v1/jobs", json={"lab": "fp8-step", "params": {"steps": 0}}, headers=headers)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "steps"
    r = client.get("/api/v1/tools/fp8-range", params={"margin": 99})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "margin"


def test_a_calculator_answers_as_its_documented_model(client, document):
    client.register("ann@example.org")
    answer = client.get("/api/v1/tools/overlap-window", params={"predicts": "total", "predict": "14 ms"}).json()
    assert _validator(document, "ToolAnswer").is_valid(answer), answer
    assert answer["prediction"]["right"] is True
