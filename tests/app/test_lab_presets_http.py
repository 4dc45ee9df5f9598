"""Presets on a lab page: named runs the lesson's pauses link to, as plain links that fill the form (no JavaScript
needed), and the form's line on how long a run takes here."""

from __future__ import annotations

import html
import re

from labs import catalog


def _value(page: str, name: str) -> str | None:
    field = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
    if field is None:
        return None
    value = re.search(r'value="([^"]*)"', field.group(0))
    return value.group(1) if value else None


def test_every_preset_is_a_link_and_fills_the_form(client):
    client.register("ann@example.org")
    for spec in catalog.LABS.values():
        page = html.unescape(client.get(f"/labs/{spec.name}").text)
        for preset in spec.presets:
            assert f'href="/labs/{spec.name}?preset={preset.key}#lab-form"' in page, (spec.name, preset.key)
    spec = catalog.get("fp8-step")
    chosen = next(p for p in spec.presets if "outlier_step" in p.params or "steps" in p.params)
    page = html.unescape(client.get(f"/labs/fp8-step?preset={chosen.key}").text)
    assert 'aria-current="true"' in page
    for name, value in chosen.params.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert _value(page, name) == str(value), (name, value)


def test_an_unknown_preset_is_a_404_naming_the_known_ones(client):
    client.register("ann@example.org")
    r = client.get("/labs/fp8-step?preset=nope")
    assert r.status_code == 404
    spec = catalog.get("fp8-step")
    assert spec.presets[0].key in html.unescape(r.text)


def test_the_form_says_how_long_a_run_takes_before_the_first_run(client):
    client.register("ann@example.org")
    page = html.unescape(client.get("/labs/fp8-step").text)
    line = re.search(r'data-testid="run-duration">([^<]+)<', page)
    assert line is not None and "A run takes about" in line.group(1) and "CPU" in line.group(1), page[-3000:]
