"""The reference sections outside a lesson's timed parts (knowledge atlas, hands-on lab, "Go deeper") exist only
when the lesson has something to show in them, and every place that offers one follows that: the pacing list,
the header's lab link and the next step after the last part (app/web/views/lesson_pages.py `sections`)."""

import re

import pytest

from app.content import load_course
from app.core.config import ROOT
from app.web.templates import templates
from app.web.views.lesson_pages import SECTIONS, section_missing, sections


@pytest.fixture(scope="module")
def course():
    loaded = load_course(ROOT / "lessons")
    assert not loaded.errors
    return loaded.lessons


def _without(lesson, *, atlas=False, lab=False, references=False):
    header = lesson.header.model_copy(update={"references": []}) if references else lesson.header
    update = {"header": header}
    if atlas:
        update["atlas"] = None
    if lab:
        update["lab"] = None
    return lesson.model_copy(update=update)


def test_sections_are_the_ones_the_lesson_has(course):
    assert sections(course["transformer-scaling"]) == SECTIONS  # atlas.yaml, lab.yaml and references
    assert list(sections(course["planning-at-scale"])) == ["references"]  # no atlas.yaml, no lab.yaml
    assert list(sections(course["precision-by-numbers"])) == ["references"]
    scaling = course["transformer-scaling"]
    assert list(sections(_without(scaling, lab=True))) == ["atlas", "references"]
    assert sections(_without(scaling, atlas=True, lab=True, references=True)) == {}


def _pacing(lesson) -> str:
    return templates.env.get_template("lessons/_pacing.html").render(
        lesson=lesson, version=1, current_version=1, part_id=lesson.parts[0].id, done=set(), sections=sections(lesson)
    )


def test_the_pacing_list_offers_only_the_sections_the_lesson_has(course):
    scaling = course["transformer-scaling"]
    html = _pacing(_without(scaling, lab=True))
    assert "/transformer-scaling/atlas" in html and "/transformer-scaling/references" in html
    assert "/transformer-scaling/lab" not in html and "Hands-on lab" not in html
    bare = _pacing(_without(scaling, atlas=True, lab=True, references=True))
    assert "Outside the core time" not in bare  # no heading over an empty list
    assert all(f'href="/lessons/transformer-scaling/{p.id}"' in bare for p in scaling.parts)


def _next_after_last_part(lesson) -> str:
    html = templates.env.get_template("lessons/_part_foot.html").render(
        lesson=lesson, part=lesson.parts[-1], version=1, current_version=1, progress={}, csrf_token="t"
    )
    return re.search(r'<a class="next"[^>]*>[^<]*</a>', html).group(0)


@pytest.mark.parametrize(
    "missing, href, text",
    [
        ({}, "/lessons/transformer-scaling/lab", "Hands-on lab →"),
        ({"lab": True}, "/lessons/transformer-scaling/atlas", "Knowledge atlas →"),
        ({"lab": True, "atlas": True}, "/lessons/transformer-scaling/references", "Go deeper →"),
        ({"lab": True, "atlas": True, "references": True}, "/", "All lessons →"),
    ],
)
def test_after_the_last_part_comes_the_next_thing_the_lesson_has(course, missing, href, text):
    link = _next_after_last_part(_without(course["transformer-scaling"], **missing))
    assert f'href="{href}"' in link and link.endswith(f">{text}</a>")


def test_the_header_links_the_lab_only_when_there_is_one(course):
    head = templates.env.get_template("lessons/_lesson_head.html")
    scaling = course["transformer-scaling"]
    assert 'href="/lessons/transformer-scaling/lab"' in head.render(lesson=scaling, version=1)
    html = head.render(lesson=_without(scaling, lab=True), version=1)
    assert "/lab" not in html and 'href="/play"' in html  # the interactive lesson stays
    plan = head.render(lesson=course["planning-at-scale"], version=1)  # interactive: [memory], no lab.yaml
    assert 'href="/play"' in plan and "Hands-on lab" not in plan


def test_a_missing_section_says_so_in_the_learners_words(course):
    plan, scaling = course["planning-at-scale"], course["transformer-scaling"]
    assert section_missing(plan, "lab") == "Lesson 08 · Planning a run by the numbers has no hands-on lab."
    assert section_missing(plan, "atlas") == "Lesson 08 · Planning a run by the numbers has no knowledge atlas."
    assert section_missing(plan, "references") is None  # lesson.yaml has references
    assert section_missing(_without(scaling, references=True), "references").endswith("has no “Go deeper” links.")
    assert [section_missing(scaling, sid) for sid in SECTIONS] == [None, None, None]
    assert section_missing(plan, "plan") is None  # a part, not a section: the route's own 404 says so
