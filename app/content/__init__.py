"""Lesson content: schema, loader, computed numbers, practice engine and Markdown rendering.

The web layer needs only these:

    from app.content import load_course, validate_lesson_texts, make_variant, grade, render_markdown
"""

from .errors import ContentError
from .loader import Course, load_course, validate_lesson_dir, validate_lesson_texts
from .markdown import render_inline, render_markdown
from .practice import Feedback, Variant, grade, make_variant

__all__ = [
    "ContentError",
    "Course",
    "load_course",
    "validate_lesson_dir",
    "validate_lesson_texts",
    "render_inline",
    "render_markdown",
    "Feedback",
    "Variant",
    "grade",
    "make_variant",
]
