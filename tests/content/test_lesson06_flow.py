"""Lesson 06's flow: the worked example is linked wherever a part leans on it."""

import re

import yaml

from .conftest import LESSONS


def test_every_mention_of_the_worked_example_links_to_it(l06):
    anchors = {"worked-example"} | {f"ex-{s.id}" for s in l06.atlas.worked_example.steps}
    mentions = 0
    for f in sorted((LESSONS / "transformer-scaling" / "parts").glob("*.yaml")):
        text = " ".join(f.read_text().split())
        for m in re.finditer(r"worked example", text, re.I):
            mentions += 1
            link = re.match(r"\]\(/lessons/transformer-scaling/atlas#([a-z0-9-]+)\)", text[m.end() :])
            assert link, (f.name, text[max(0, m.start() - 60) : m.end() + 60])
            assert link.group(1) in anchors, (f.name, link.group(1))
    assert mentions >= 4
    assert yaml.safe_load((LESSONS / "transformer-scaling" / "atlas.yaml").read_text())["worked_example"]


def test_the_sources_coverage_is_taught(l06):
    """Seed 000's context parallelism, seed 004's TE modules and what FP8 buys, each where the lesson uses it."""
    sections = {b.id: " ".join(b.body.split()) for _, b in l06.blocks("section")}
    assert "ring attention" in sections["parallel-axes"] and "keys and values" in sections["parallel-axes"]
    te = sections["te-modules"]
    for name in ("te.LayerNormLinear", "te.LayerNormMLP", "te.TransformerLayer", "fp8_model_init"):
        assert name in te, name
    assert "twice its BF16 peak" in te and "Small GEMMs gain nothing" in te and "grows with the model" in te
    assert {f.name for _, b in l06.blocks("section") for f in b.figures} >= {"device-mesh", "tp-roofline"}
