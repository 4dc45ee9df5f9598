"""The course's order said where learners choose a lesson, and the worked example one link away."""

import re


def test_the_dashboard_says_the_order_and_what_the_years_mean(client):
    client.register("ann@example.org")
    page = client.get("/").text
    note = re.sub(r"\s+", " ", re.search(r'<div class="path-note.*?</div>', page, re.S).group(0))
    assert "Take them in order." in note and "historical anchor" in note and "second pass" in note
    cards = page.split('class="card lesson-card"')[1:]
    assert len(cards) >= 3
    first, second = cards[0], cards[1]
    assert "Transformer Scaling" in first and "Anchor 2022: Hopper FP8 / Transformer Engine" in first
    assert "Builds on Lesson 06 · Transformer Scaling" in second
    assert re.search(r"About \d+ min \(\+ \d+ optional\)", first)


def test_the_worked_example_is_one_link_away(client):
    client.register("ann@example.org")
    atlas = client.get("/lessons/transformer-scaling/atlas").text
    assert 'id="worked-example"' in atlas and 'id="ex-compute-scale"' in atlas and 'id="ex-step-time"' in atlas
    deep = client.get("/lessons/transformer-scaling/deep-dives").text
    assert 'href="/lessons/transformer-scaling/atlas#ex-compute-scale"' in deep
    assert 'href="/lessons/transformer-scaling/atlas#ex-step-time"' in deep
