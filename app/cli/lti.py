"""`python -m app lti …`: register an LMS and run its services from a shell (app/cli/commands.py dispatches here).

lti add-platform --name … --issuer … --client-id … --deployment-id … --auth-login-url … --auth-token-url …
                 --key-set-url … [--auth-audience …] [--replace]
                                                          register (or add deployment ids to) a platform; changing
                                                          an existing one's URLs needs --replace; recorded
lti list                                                  registrations, LMS courses and their classes, the links
lti map-context --context ID --class SLUG                 an LMS course gives roles in that class from now on
lti sync-roster --link ID                                 Names and Role Provisioning for one link's course
lti send-grades --link ID                                 released report grades to one link's gradebook column
"""

from __future__ import annotations

import argparse
import sys

from app.core.config import Settings
from app.services.errors import DomainError, FieldError

PATHS = {"login": "/lti/login", "launch (redirect, deep linking)": "/lti/launch", "JWKS": "/lti/jwks.json"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lti_cmd", required=True)
    add = sub.add_parser("add-platform", help="register an LMS (or add deployment ids to its registration)")
    add.add_argument("--name", required=True, help="shown to instructors, e.g. 'Canvas (university)'")
    add.add_argument("--issuer", required=True)
    add.add_argument("--client-id", required=True)
    add.add_argument("--deployment-id", action="append", required=True, help="repeat for several")
    add.add_argument("--auth-login-url", required=True, help="the LMS's OIDC authorization endpoint")
    add.add_argument("--auth-token-url", required=True, help="the LMS's OAuth2 token endpoint")
    add.add_argument("--key-set-url", required=True, help="the LMS's public JWKS")
    add.add_argument("--auth-audience", default="", help="token audience, only where the LMS names one")
    add.add_argument("--replace", action="store_true", help="change an existing registration's name and URLs")
    sub.add_parser("list", help="registered platforms, LMS courses and their classes, the tool's URLs, the links")
    mapping = sub.add_parser("map-context", help="map an LMS course (id from `lti list`) to a class")
    mapping.add_argument("--context", type=int, required=True)
    mapping.add_argument("--class", dest="klass", required=True, help="the class's address (slug)")
    for name, what in (
        ("sync-roster", "sync one link's course roster"),
        ("send-grades", "send released report grades"),
        ("send-practice", "send practice scores of a lesson link"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("--link", type=int, required=True, help="the link's id, from `lti list`")


def main(settings: Settings, args: argparse.Namespace) -> int:
    from app.core.db import make_engine, make_sessionmaker
    from app.core.migrate import upgrade
    from app.core.models import LtiContext
    from app.services.classes import registry as class_registry
    from app.services.lti import contexts
    from app.services.lti import registry as lti
    from app.services.lti import sync as lti_sync

    upgrade(settings.db_url)
    base = settings.site_url
    with make_sessionmaker(make_engine(settings.db_url))() as db:
        try:
            if args.lti_cmd == "add-platform":
                row = lti.register(
                    db,
                    name=args.name,
                    issuer=args.issuer,
                    client_id=args.client_id,
                    auth_login_url=args.auth_login_url,
                    auth_token_url=args.auth_token_url,
                    key_set_url=args.key_set_url,
                    deployment_ids=sorted(set(args.deployment_id)),
                    auth_audience=args.auth_audience,
                    via="cli",
                    replace=args.replace,
                )
                lti.tool_key(settings.data_dir)  # made now, so the JWKS URL answers before the first launch
                print(f"Registered {row.name}: issuer {row.issuer}, client id {row.client_id}, deployments "
                      f"{', '.join(d.deployment_id for d in row.deployments)}")  # fmt: skip
                for what, path in PATHS.items():
                    print(f"  tool {what} URL: {base}{path}")
                return 0
            if args.lti_cmd == "list":
                for p in lti.platforms(db):
                    deps = ", ".join(d.deployment_id for d in p.deployments)
                    print(f"platform {p.id}: {p.name}  issuer {p.issuer}  client id {p.client_id}  deployments {deps}")
                for c, k, p in contexts.contexts(db):
                    print(f"LMS course {c.id}: {c.title or c.context_id} on {p.name} -> class {k.slug}")
                for what, path in PATHS.items():
                    print(f"tool {what} URL: {base}{path}")
                for link in lti.links(db):
                    print(f"link {link.id}: {link.context_title or link.context_id} -> {link.target}")
                return 0
            if args.lti_cmd == "map-context":
                context = db.get(LtiContext, args.context)
                klass = class_registry.by_slug(db, slug=args.klass)
                if context is None:
                    print(f"--context: no LMS course {args.context}; `lti list` shows them", file=sys.stderr)
                    return 2
                if klass is None:
                    print(f"--class: no class {args.klass!r}", file=sys.stderr)
                    return 2
                contexts.map_context(db, context=context, klass=klass, by=None, via="cli")
                print(f"LMS course {context.title or context.context_id} now gives roles in class {klass.slug}")
                return 0
            chosen = lti.link(db, link_id=args.link)
            if chosen is None:
                print(f"--link: no link {args.link}; `lti list` shows the links launched", file=sys.stderr)
                return 2
            key = lti.tool_key(settings.data_dir)
            if args.lti_cmd == "sync-roster":
                r = lti_sync.sync_roster(db, link=chosen, key=key)
                print(f"{r.members} members, {r.created} new accounts, {r.roles_changed} roles set, {r.left} left")
            elif args.lti_cmd == "send-practice":
                print(f"{lti_sync.send_practice(db, link=chosen, key=key)} practice scores sent")
            else:
                g = lti_sync.send_grades(db, link=chosen, key=key)
                print(f"{g.sent} sent, {g.already} sent before, {g.without_grade} without a released grade")
            return 0
        except FieldError as exc:
            print(f"--{exc.field.replace('_', '-')}: {exc.message}", file=sys.stderr)
            return 2
        except DomainError as exc:
            print(exc.message, file=sys.stderr)
            return 1
