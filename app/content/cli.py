"""`python -m app lessons validate [ROOT]`: check every lesson folder and print what is wrong.

app/cli/commands.py calls `validate_command(root)`; it prints one line per error
(`file:line: field: expected …, found …`) and a summary, and returns the process exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from labs.api import count

from .loader import load_course


def validate_command(root: Path, out: TextIO | None = None) -> int:
    """0 when every lesson under root is valid, 1 otherwise."""
    out = out or sys.stdout
    course = load_course(Path(root))
    for error in course.errors:
        print(error, file=out)
    for lesson in course.ordered():
        n_q = len(lesson.questions)
        print(
            f"ok  {lesson.id}: lesson {lesson.number:02d} '{lesson.title}', {len(lesson.parts)} parts, "
            f"{lesson.read_time_minutes} min, {count(n_q, 'question')}",
            file=out,
        )
    broken = course.broken
    if course.errors:
        n, m = len(course.errors), len(broken)
        print(f"{count(n, 'error')} in {count(m, 'lesson')}: {', '.join(sorted(broken))}", file=out)
        return 1
    n = len(course.lessons)
    print(f"{count(n, 'lesson')} valid", file=out)
    return 0


if __name__ == "__main__":  # a fallback until the app's own CLI wires it in
    sys.exit(validate_command(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("lessons")))
