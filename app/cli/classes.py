"""`python -m app classes …`: a site admin's classes from a shell (app/cli/commands.py dispatches here).

classes create --slug S --title T [--term T] [--lesson ID ...] [--instructor EMAIL]
                                          a class offering these lessons (every lesson when none is named), with its
                                          first instructor (an existing account)
classes list                              every class: address, title, people, invite code
"""

from __future__ import annotations

import argparse
import sys

from app.core.config import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="classes_cmd", required=True)
    create = sub.add_parser("create", help="create a class")
    create.add_argument("--slug", required=True, help="its address: /classes/SLUG (lowercase letters, digits, dashes)")
    create.add_argument("--title", required=True)
    create.add_argument("--term", default="")
    create.add_argument("--lesson", action="append", help="a lesson it offers; repeat (default: every lesson)")
    create.add_argument("--instructor", help="the email of its first instructor (an existing account)")
    sub.add_parser("list", help="every class with its people counted and its invite code")


def main(settings: Settings, args: argparse.Namespace) -> int:
    from app.core.db import make_engine, make_sessionmaker
    from app.core.migrate import upgrade
    from app.services.accounts import users
    from app.services.classes import registry as class_registry
    from app.services.learning import lessons as lesson_service

    upgrade(settings.db_url)
    with make_sessionmaker(make_engine(settings.db_url))() as db:
        if args.classes_cmd == "list":
            for k in class_registry.all_classes(db):
                people = class_registry.people(db, klass=k)
                counts = ", ".join(
                    f"{sum(1 for _, m in people if m.role == r and m.left_at is None)} {r}s"
                    for r in ("learner", "grader", "instructor")
                )
                print(f"{k.slug}: {k.title}{f' ({k.term})' if k.term else ''}; {counts}; invite code {k.invite_code}")
            return 0
        instructor = None
        if args.instructor:
            instructor = users.get_by_email(db, email=args.instructor)
            if instructor is None:
                print(f"--instructor: no account has the address {args.instructor!r}", file=sys.stderr)
                return 2
        known = {les.id for les, _ in lesson_service.catalogue(db)}
        if settings.lessons_dir.is_dir():  # before the first `serve` the lessons are folders, not yet published
            known |= {
                p.name for p in settings.lessons_dir.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
            }
        try:
            klass = class_registry.create(
                db, slug=args.slug, title=args.title, term=args.term, lesson_ids=args.lesson, known_lessons=known
            )
        except class_registry.ClassError as exc:
            for field, message in exc.errors.items():
                print(f"--{'lesson' if field == 'lessons' else field}: {message}", file=sys.stderr)
            return 2
        if instructor is not None:
            class_registry.enrol(db, klass=klass, user_id=instructor.id, role="instructor", via="cli")
        print(f"created class {klass.slug} ({klass.title}) in {settings.db_where}; invite code {klass.invite_code}")
    return 0
