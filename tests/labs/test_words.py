from labs.words import count


def test_count_uses_the_singular_only_for_one():
    assert [count(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert count(3, "process", "processes") == "3 processes" and count(1, "process", "processes") == "1 process"


def test_templates_have_count():
    from app.web.templates import templates

    page = templates.env.from_string("{{ count(1, 'question') }} / {{ count(4, 'job') }} still open")
    assert page.render() == "1 question / 4 jobs still open"
