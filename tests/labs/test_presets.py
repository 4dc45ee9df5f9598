"""Presets: every named run validates like a submission and fits a CPU-only host; lessons link only real ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs import catalog

ROOT = Path(__file__).resolve().parents[2]
PRESETS = [(lab, p) for lab, spec in catalog.LABS.items() for p in spec.presets]


@pytest.mark.parametrize(("lab", "preset"), PRESETS, ids=[f"{lab}:{p.key}" for lab, p in PRESETS])
def test_every_preset_validates_and_runs_on_the_cpu_backend(lab, preset):
    spec = catalog.get(lab)
    params = spec.params.model_validate(dict(preset.params))
    assert spec.problems(params, "cpu", catalog.Capacity(cpu_slots=8, gpus=0, memory_bytes=8 * 2**30)) == []
    assert preset.why and len(preset.why) < 200 and "\n" not in preset.why  # one line on what it shows
    assert spec.preset(preset.key) is preset
    assert spec.estimate_seconds(params, "cpu") > 0


def test_preset_keys_are_unique_per_lab_and_url_words():
    for spec in catalog.LABS.values():
        keys = [p.key for p in spec.presets]
        assert len(keys) == len(set(keys)), spec.name
        assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", k) for k in keys)


def test_the_default_fp8_step_run_shows_the_spike_and_a_short_run_has_none():
    P = catalog.get("fp8-step").params
    assert P().outlier_step == 20 and P().steps > 20
    assert P.model_validate({"steps": 10}).outlier_step is None  # not asked for: the default spike leaves
    with pytest.raises(ValueError, match="a step below steps=10"):
        P.model_validate({"steps": 10, "outlier_step": 20})  # asked for: refused, naming the field


def test_lesson_links_to_presets_name_real_ones():
    links = []
    for path in sorted((ROOT / "lessons").rglob("*.yaml")):
        links += [
            (path.name, lab, key)
            for lab, key in re.findall(r"/labs/([a-z0-9-]+)\?preset=([a-z0-9-]+)", path.read_text())
        ]
    assert links, "the lesson's pauses link their presets"
    for where, lab, key in links:
        assert key in {p.key for p in catalog.get(lab).presets}, f"{where}: {lab} has no preset {key}"


def test_cost_model_grows_with_the_size_of_a_run():
    for lab, small, big in (
        ("fp8-step", {"steps": 50}, {"steps": 500}),
        ("tp-sweep", {"degrees": [1, 2]}, {"degrees": [1, 2, 4], "tokens": 2048}),
        ("overlap-trace", {"steps": 2}, {"steps": 20, "tokens": 4096}),
    ):
        spec = catalog.get(lab)
        assert spec.estimate_seconds(spec.params(**small), "cpu") < spec.estimate_seconds(spec.params(**big), "cpu")
