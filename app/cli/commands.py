"""Command line for the course server (`python -m app`, through app/__main__.py).

python -m app serve [--host 127.0.0.1] [--port 8000]   check labs, migrate, start lab workers once, serve
python -m app worker                                  run one lab worker (refuses to start if a lab is broken)
python -m app dispatcher                              ray mode: claim jobs in fair order and run them as Ray tasks
python -m app ray-node-flags                          print the `ray start` flags that advertise this host's labs
python -m app migrate                                 apply database migrations
python -m app backup DIR | restore DIR                the database and the data folder's results (app/cli/backup.py)
python -m app users create --email E --password P --role admin [--role author]
                      [--role instructor|grader|learner --class SLUG]
                                                      (an existing user: adds the roles; --password replaces theirs;
                                                      admin and author are site roles, the others a role in --class,
                                                      which may be left out while there is only one class)
python -m app users reset-link --email E                 a one-time password-reset link (mailed if SMTP is set)
python -m app classes create --slug S --title T [--term] [--lesson ID ...] [--instructor E] | classes list
python -m app lessons validate [ROOT]                 check every lesson under lessons/ (or ROOT)
python -m app graders assign --email E --lesson L [--class SLUG]   let grader E grade lesson L's reports there
python -m app settings-doc [--check]                  regenerate (or verify) docs/settings.md from the settings model
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from app.core.config import Settings, SettingsError


def _migrated(settings: Settings) -> None:
    """Create the data dir and migrate: a command run before the first `serve` must work on a fresh checkout."""
    from app.core import migrate

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    migrate.upgrade(settings.db_url)


def _users_reset_link(settings: Settings, args) -> int:
    from app.core.db import make_engine, make_sessionmaker
    from app.services.accounts import resets, users

    _migrated(settings)
    with make_sessionmaker(make_engine(settings.db_url))() as db:
        user = users.get_by_email(db, email=args.email)
        if user is None:
            print(f"--email: no account has the address {args.email!r}", file=sys.stderr)
            return 2
        row, token = resets.issue(db, user=user, issued_by=None, lifetime_s=settings.reset_link_s)
        url = resets.link(settings.site_url, token)
        hours = settings.reset_link_s // 3600
        if settings.smtp_url:
            try:
                resets.send(settings, user=user, url=url, expires_at=row.expires_at)
            except resets.MailError as exc:
                print(f"not mailed: {exc}; pass the link on yourself", file=sys.stderr)
            else:
                print(
                    f"mailed a reset link to {user.email}, an account in {settings.db_where} (works once, within {hours} hours)"
                )
                return 0
    if not settings.public_url:
        print(f"(COURSE_PUBLIC_URL is not set: the link assumes the course is at {settings.site_url})", file=sys.stderr)
    print(f"reset link for {user.email} in {settings.db_where} (works once, within {hours} hours):\n{url}")
    return 0


SITE_ROLES = ("admin", "author")
CLASS_ROLE_CHOICES = ("learner", "grader", "instructor")


def _class_for(db, args):
    """The class --class names, or the only class when it is left out; None after printing why not."""
    from app.services.classes import registry as class_registry

    if getattr(args, "klass", None):
        klass = class_registry.by_slug(db, slug=args.klass)
        if klass is None:
            known = ", ".join(k.slug for k in class_registry.all_classes(db)) or "none"
            print(f"--class: no class {args.klass!r}; classes: {known}", file=sys.stderr)
        return klass
    klass = class_registry.default_class(db)
    if klass is None:
        known = ", ".join(k.slug for k in class_registry.all_classes(db)) or "none"
        print(f"--class: name the class (there are several: {known})", file=sys.stderr)
    return klass


def _class_role(db, args):
    """(class, role) for a class role in --role, None for none; False after printing why it cannot be given."""
    wanted = [r for r in (args.role or []) if r in CLASS_ROLE_CHOICES]
    if not wanted:
        return None
    rank = {r: i for i, r in enumerate(CLASS_ROLE_CHOICES)}
    klass = _class_for(db, args)
    if klass is None:
        return False
    return klass, max(wanted, key=rank.__getitem__)  # one role per class: the strongest named


def _users_create(settings: Settings, args) -> int:
    """A new account, or roles (and, when given, a password or name) for an existing one. An existing account is
    never prompted for a password, since nothing would use one typed there."""
    from app.core.db import make_engine, make_sessionmaker
    from app.services.accounts import users
    from app.services.classes import registry as class_registry

    _migrated(settings)
    with make_sessionmaker(make_engine(settings.db_url))() as db:
        existing = users.get_by_email(db, email=args.email)
        placed = _class_role(db, args)
        if placed is False:
            return 2
        try:
            if existing:
                return _users_update(db, settings, existing, args, placed)
            password = args.password if args.password is not None else _read_password()
            if password is None:
                print("--password: required (no terminal to ask on, and nothing on stdin)", file=sys.stderr)
                return 2
            user = users.create_user(
                db,
                email=args.email,
                password=password,
                display_name=args.name or "",
                roles=[r for r in args.role or [] if r in SITE_ROLES],
            )
        except users.UserError as exc:
            print(f"--{_FLAGS.get(exc.field, exc.field)}: {exc.message}", file=sys.stderr)
            return 2
        if placed:
            klass, role = placed
            class_registry.enrol(db, klass=klass, user_id=user.id, role=role, via="cli")
        said = _roles_said(db, user)
    print(f"created {user.email} with {said} in {settings.db_where}")
    return 0


def _roles_said(db, user) -> str:
    """ "roles admin; instructor of default", or "no roles": what the account holds now, site-wide and per class."""
    from app.services.classes import registry as class_registry

    parts = [f"{m.role} of {m.klass.slug}" for m in class_registry.memberships(db, user_id=user.id) if not m.left]
    site = ", ".join(sorted(user.roles))
    said = "; ".join(filter(None, [f"site roles {site}" if site else "", ", ".join(parts)]))
    return said or "no roles"


def _read_password() -> str | None:
    """Asked for on a terminal; else the first line of stdin (`printf '%s\\n' "$PW" | python -m app users create
    ...`), so a script need not put the password in the process list. None: nothing to read."""
    try:
        if sys.stdin.isatty():
            return getpass.getpass("Password: ")
        return sys.stdin.readline().rstrip("\n") or None
    except EOFError:
        return None


_FLAGS = {"roles": "role", "display_name": "name"}  # UserError fields -> this command's flags


def _users_update(db, settings: Settings, user, args, placed) -> int:
    from app.services.accounts import users
    from app.services.classes import registry as class_registry

    # every value checked before anything is written: a refused password must not leave the roles added
    if args.password is not None:
        users.check_password(args.password)
    if args.name:
        users.check_display_name(args.name)
    done = []
    site = [r for r in args.role or [] if r in SITE_ROLES]
    if site:
        added = users.add_roles(db, user=user, roles=site)
        done.append(f"added roles {', '.join(added)}" if added else f"already had roles {', '.join(sorted(site))}")
    if placed:
        klass, role = placed
        _, changed = class_registry.enrol(db, klass=klass, user_id=user.id, role=role, via="cli")
        done.append(f"{'now' if changed else 'already'} {role} of {klass.slug}")
    if args.password is not None:
        ended = users.set_password(db, user=user, password=args.password)
        done.append(f"set a new password (ended {ended} session(s))")
    if args.name:
        users.change_display_name(db, user=user, display_name=args.name)
        done.append(f"renamed to {args.name.strip()!r}")
    if not done:
        done.append("nothing changed (it exists; --role adds roles, --password sets a new password)")
    print(f"{user.email}: {'; '.join(done)}; now {_roles_said(db, user)} in {settings.db_where}")
    return 0


def _graders_assign(settings: Settings, args) -> int:
    from app.core.db import make_engine, make_sessionmaker
    from app.services.accounts import users
    from app.services.classes import registry as class_registry
    from app.services.grading import grades as grading
    from app.services.learning import lessons as lesson_service

    _migrated(settings)
    with make_sessionmaker(make_engine(settings.db_url))() as db:
        klass = _class_for(db, args)
        if klass is None:
            return 2
        user = users.get_by_email(db, email=args.email)
        role = class_registry.role_in(db, class_id=klass.id, user_id=user.id) if user else None
        if user is None or role not in ("grader", "instructor"):
            print(
                f"--email: no grader {args.email!r} in class {klass.slug}; make one with "
                f"`users create --role grader --class {klass.slug}` first",
                file=sys.stderr,
            )
            return 2
        # Published lessons, and the folders `serve` publishes at start-up: assigning before the first `serve`
        # must work. A lesson id outside both is refused: stored, it would grant nothing.
        known = {lesson.id for lesson, _ in lesson_service.catalogue(db)}
        if settings.lessons_dir.is_dir():
            known |= {
                p.name for p in settings.lessons_dir.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
            }
        if args.lesson not in known:
            print(
                f"--lesson: no lesson {args.lesson!r}; known lessons: {', '.join(sorted(known)) or 'none'}",
                file=sys.stderr,
            )
            return 2
        new = grading.assign(db, klass=klass, grader=user, lesson_id=args.lesson)
    print(
        f"{user.email} {'now grades' if new else 'already grades'} {args.lesson} in class {klass.slug}, "
        f"{settings.db_where}"
    )
    return 0


def _settings_doc(path: Path, *, check: bool) -> int:
    """Write the settings table, or with check=True say whether the committed one is the model's (exit 1 if not),
    as `python -m labs schema --check` does for the result schema."""
    from app.core.settings_doc import settings_markdown

    table = settings_markdown()
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if check:
        if current == table:
            return 0
        print(
            f"{path} differs from the settings in app/core/config.py; "
            "regenerate it with `python -m app settings-doc` and commit it",
            file=sys.stderr,
        )
        return 1
    if current != table:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(table, encoding="utf-8")
        print(f"wrote {path}")
    return 0


NODE_COMMANDS = ("ray-node-flags", "ray-node-health", "dispatcher-health")  # no session signed, no database
DB_COMMANDS = ("serve", "worker", "dispatcher", "migrate", "users", "graders", "lti", "classes", "backup", "restore")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve_p = sub.add_parser("serve", help="serve the course (embedded SQLite and worker by default)")
    serve_p.add_argument("--host", default="127.0.0.1")
    serve_p.add_argument("--port", type=int, default=8000)
    worker = sub.add_parser("worker", help="run a worker that executes lab jobs")
    worker.add_argument(
        "--skip-lab-check", action="store_true", help="the caller has run `python -m labs check` (the server does)"
    )
    sub.add_parser("dispatcher", help="ray mode: claim queued jobs in fair order and run each as a Ray task")
    sub.add_parser("ray-node-flags", help="print the `ray start` flags that advertise this host's lab capabilities")
    sub.add_parser(
        "dispatcher-health",
        help="exit 0 if each dispatcher on this host (active or standing by) completed a cycle in the last 30 s",
    )
    sub.add_parser(
        "ray-node-health", help="exit 0 if this lab node's raylet runs and the cluster lists its node id ALIVE"
    )
    sub.add_parser("migrate", help="apply database migrations")
    for name, what in (
        ("backup", "copy the database and the data folder's jobs/ and bundles/ into a new folder"),
        ("restore", "fill a fresh deployment (empty database, no results) from a backup folder, then migrate"),
    ):
        sub.add_parser(name, help=what).add_argument("folder", type=Path, help="the backup folder")
    users_p = sub.add_parser("users", help="manage users")
    users_sub = users_p.add_subparsers(dest="users_cmd", required=True)
    create = users_sub.add_parser("create", help="create a user, or add roles to an existing one")
    create.add_argument("--email", required=True)
    create.add_argument("--password", help="a new account's (prompted for when omitted); sets an existing one's")
    create.add_argument("--name", default="", help="display name (default: the part of the address before @)")
    create.add_argument(
        "--role",
        action="append",
        choices=[*SITE_ROLES, *CLASS_ROLE_CHOICES],
        help="admin, author: site roles (an admin creates classes and registers LMSs); learner, grader, "
        "instructor: a role in --class. Repeat for several",
    )
    create.add_argument("--class", dest="klass", help="the class of a class role (default: the only class)")
    reset = users_sub.add_parser("reset-link", help="issue a one-time password-reset link for a user")
    reset.add_argument("--email", required=True)
    graders_p = sub.add_parser("graders", help="who grades which lesson's lab reports")
    graders_sub = graders_p.add_subparsers(dest="graders_cmd", required=True)
    assign = graders_sub.add_parser("assign", help="let a grader grade one lesson's lab reports")
    assign.add_argument("--email", required=True)
    assign.add_argument("--lesson", required=True, help="lesson id, e.g. transformer-scaling")
    assign.add_argument("--class", dest="klass", help="the class they grade it in (default: the only class)")
    from app.cli import classes as classes_cli

    classes_cli.add_arguments(sub.add_parser("classes", help="classes: create them, list them"))
    lessons_p = sub.add_parser("lessons", help="course content")
    lessons_sub = lessons_p.add_subparsers(dest="lessons_cmd", required=True)
    validate_p = lessons_sub.add_parser("validate", help="validate every lesson; exit 1 on errors")
    validate_p.add_argument(
        "root", nargs="?", type=Path, help="a folder of lesson folders (default: the course's, COURSE_LESSONS_DIR)"
    )
    from app.cli import lti as lti_cli

    lti_cli.add_arguments(sub.add_parser("lti", help="LTI 1.3: register an LMS, sync its roster, send grades"))
    doc_p = sub.add_parser("settings-doc", help="write docs/settings.md from the settings model")
    doc_p.add_argument("--check", action="store_true", help="exit 1 if the committed file differs, writing nothing")
    args = parser.parse_args(argv)

    if args.cmd == "settings-doc":  # documents the settings, so it reads none (a bad one must not stop it)
        from app.core.config import ROOT
        from app.core.settings_doc import SETTINGS_DOC

        return _settings_doc(ROOT / SETTINGS_DOC, check=args.check)

    try:
        # a Ray node's commands sign nothing, and a node has no secret key (docker-compose.yml: ray-cpu, ray-gpu)
        settings = Settings.from_env(signs_sessions=args.cmd not in NODE_COMMANDS)
        if args.cmd == "serve":
            from app.cli.preflight import check_bind
            from app.cli.serve import check_port, check_public_url

            check_bind(settings, args.host)
            check_public_url(settings)
            check_port(args.host, args.port)
        if args.cmd in ("serve", "dispatcher"):
            from app.cli.preflight import check_executor
            from app.cli.ray_auth import check_ray_auth

            check_ray_auth(settings, args.cmd, getattr(args, "host", None), os.environ)
            check_executor(settings, args.cmd)
        if args.cmd in DB_COMMANDS:
            from app.services.startup import check_database

            check_database(settings)
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2

    if args.cmd == "serve":
        from app.cli.serve import serve

        return serve(settings, host=args.host, port=args.port)
    if args.cmd == "worker":
        from app.executors.embedded import main as worker_main

        return worker_main(settings, check_labs=not args.skip_lab_check)
    if args.cmd == "dispatcher":
        from app.executors.ray import main as dispatcher_main

        return dispatcher_main(settings)
    if args.cmd == "ray-node-flags":
        from app.executors.ray_node import node_flags_main

        return node_flags_main(settings)
    if args.cmd == "dispatcher-health":
        from app.executors.ray_health import dispatcher_health_main

        return dispatcher_health_main(settings.dispatcher_alive_s)
    if args.cmd == "ray-node-health":
        from app.executors.ray_node import node_health_main

        return node_health_main()
    if args.cmd in ("backup", "restore"):
        from app.cli import backup

        return backup.main(settings, args.cmd, args.folder)
    if args.cmd == "migrate":
        _migrated(settings)
        print(f"{settings.db_where} is at the latest migration")
        return 0
    if args.cmd == "users":
        return _users_reset_link(settings, args) if args.users_cmd == "reset-link" else _users_create(settings, args)
    if args.cmd == "graders":
        return _graders_assign(settings, args)
    if args.cmd == "lti":
        return lti_cli.main(settings, args)
    if args.cmd == "classes":
        return classes_cli.main(settings, args)
    if args.cmd == "lessons":
        from app.content.cli import validate_command

        return validate_command(args.root or settings.lessons_dir)
    return 2


if __name__ == "__main__":
    sys.exit(main())
