"""Classes and their people: who is in which class, with which role, and how they got there.

    create(db, slug=…, title=…, term=…, lesson_ids=…, by=…)   -> CourseClass (a site admin's; FieldError per field)
    by_slug(db, slug=…), all_classes(db), default_class(db)   the classes; default_class: the only class, while
                                                               there is one (what a command without --class means)
    memberships(db, user_id=…)                                -> [Membership]: the class switcher's list
    role_in(db, class_id=…, user_id=…)                         -> "learner" | "grader" | "instructor" | None
    enrol(db, klass=…, user_id=…, role=…, via=…)               add a person, or change their role (FieldError)
    remove(db, klass=…, user_id=…)                             take a person out (their work stays theirs)
    people(db, klass=…)                                        -> [(User, ClassMember)], staff first
    join(db, code=…, user_id=…)                                 an invite code -> CourseClass, as a learner
    join_open(db, user_id=…)                                    registration: the classes open to it
    rotate_invite(db, klass=…)                                  a new invite code; the old one stops working
    set_lessons(db, klass=…, lesson_ids=…)                      which lessons a class offers (None: every one)

A person has one role in a class. Staff hold theirs only while they have not left; a learner who left the
LMS course stays on the roster, marked, with everything they did.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from sqlalchemy import case, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.class_models import CLASS_ROLES, JOINED_VIA, STAFF_ROLES
from app.core.models import ClassMember, CourseClass, User, utcnow
from app.services.errors import FieldError

SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
MAX_TITLE = 120
MAX_TERM = 60
# invite codes are typed from a slide or a mail: letters and digits only, no look-alikes (0/O, 1/l/I)
CODE_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
CODE_LENGTH = 10


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def check_slug(slug: str) -> str:
    slug = (slug or "").strip()
    if not SLUG.fullmatch(slug):
        raise FieldError(
            "slug",
            f"got {slug[:60]!r}; use 1 to 40 lowercase letters, digits and dashes, starting and ending with a "
            "letter or digit (it is the class's address: /classes/<slug>)",
        )
    return slug


def check_title(title: str, field: str = "title", limit: int = MAX_TITLE, required: bool = True) -> str:
    title = (title or "").strip()
    if required and not title:
        raise FieldError(field, "is empty; give the class a name its people recognise, e.g. GPU Systems, fall 2026")
    if len(title) > limit:
        raise FieldError(field, f"is {len(title)} characters long; at most {limit} are allowed")
    return title


def check_lessons(lesson_ids: list[str] | None, known: set[str]) -> list[str] | None:
    """None (every lesson) or the chosen ids, each a published lesson."""
    if lesson_ids is None:
        return None
    unknown = sorted(set(lesson_ids) - known)
    if unknown:
        raise FieldError("lessons", f"no lesson {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
    if not lesson_ids:
        raise FieldError("lessons", "pick at least one lesson, or every lesson")
    return sorted(set(lesson_ids))


def create(
    db: Session,
    *,
    slug: str,
    title: str,
    term: str = "",
    lesson_ids: list[str] | None = None,
    known_lessons: set[str] | None = None,
    by: User | None = None,
    open_registration: bool = False,
) -> CourseClass:
    """A new class; FieldError names the field (a taken slug is `slug`)."""
    errors: dict[str, str] = {}
    values: dict[str, object] = {}
    for field, check in (
        ("slug", lambda: check_slug(slug)),
        ("title", lambda: check_title(title)),
        ("term", lambda: check_title(term, "term", MAX_TERM, required=False)),
        ("lessons", lambda: check_lessons(lesson_ids, known_lessons or set(lesson_ids or ()))),
    ):
        try:
            values[field] = check()
        except FieldError as exc:
            errors.setdefault(exc.field, exc.message)
    if not errors and by_slug(db, slug=str(values["slug"])) is not None:
        errors["slug"] = f"a class with the address /classes/{values['slug']} exists already; choose another"
    if errors:
        raise ClassError(errors)
    row = CourseClass(
        slug=values["slug"],
        title=values["title"],
        term=values["term"],
        lesson_ids=values["lessons"],
        invite_code=new_code(),
        open_registration=open_registration,
        created_by_id=by.id if by else None,
    )
    db.add(row)
    try:
        db.commit()
    except IntegrityError:  # the same slug made at the same moment by another admin
        db.rollback()
        raise ClassError({"slug": f"a class with the address /classes/{slug} exists already; choose another"}) from None
    return row


class ClassError(FieldError):
    """Every refused field of a class form at once (`errors`), the first as FieldError's own field and message."""

    def __init__(self, errors: dict[str, str]):
        field, message = next(iter(errors.items()))
        super().__init__(field, message)
        self.errors = errors


def by_slug(db: Session, *, slug: str) -> CourseClass | None:
    return db.scalar(select(CourseClass).where(CourseClass.slug == slug))


def all_classes(db: Session) -> list[CourseClass]:
    return list(db.scalars(select(CourseClass).order_by(CourseClass.title, CourseClass.id)))


def default_class(db: Session) -> CourseClass | None:
    """The class a command without --class means: the only one there is; None when there are several."""
    rows = db.scalars(select(CourseClass).order_by(CourseClass.id).limit(2)).all()
    return rows[0] if len(rows) == 1 else None


@dataclass(frozen=True)
class Membership:
    klass: CourseClass
    role: str
    left: bool

    @property
    def staff(self) -> bool:
        return self.role in STAFF_ROLES and not self.left


def memberships(db: Session, *, user_id: int) -> list[Membership]:
    """Every class the person is in, staff roles first, then by title."""
    rank = case((ClassMember.role == "instructor", 0), (ClassMember.role == "grader", 1), else_=2)
    rows = db.execute(
        select(CourseClass, ClassMember)
        .join(ClassMember, ClassMember.class_id == CourseClass.id)
        .where(ClassMember.user_id == user_id)
        .order_by(rank, CourseClass.title, CourseClass.id)
    ).all()
    return [Membership(k, m.role, m.left_at is not None) for k, m in rows]


def member(db: Session, *, class_id: int, user_id: int) -> ClassMember | None:
    return db.scalar(select(ClassMember).where(ClassMember.class_id == class_id, ClassMember.user_id == user_id))


def role_in(db: Session, *, class_id: int, user_id: int) -> str | None:
    """The person's role in the class now; a member who left has none."""
    row = member(db, class_id=class_id, user_id=user_id)
    return row.role if row is not None and row.left_at is None else None


def enrol(
    db: Session, *, klass: CourseClass, user_id: int, role: str, via: str, commit: bool = True
) -> tuple[ClassMember, bool]:
    """Put a person in the class with this role (a member who left is back); returns (row, changed)."""
    if role not in CLASS_ROLES:
        raise FieldError("role", f"got {role[:20]!r}; a class role is one of {', '.join(CLASS_ROLES)}")
    assert via in JOINED_VIA, via
    row = member(db, class_id=klass.id, user_id=user_id)
    if row is None:
        row = ClassMember(class_id=klass.id, user_id=user_id, role=role, via=via)
        db.add(row)
        changed = True
    else:
        changed = row.role != role or row.left_at is not None
        row.role, row.left_at = role, None
        if changed:
            row.via = via
    if commit:
        try:
            db.commit()
        except IntegrityError:  # the same person added twice at once: the other request's row stands
            db.rollback()
            found = member(db, class_id=klass.id, user_id=user_id)
            assert found is not None
            return found, False
    else:
        db.flush()
    return row, changed


def remove(db: Session, *, klass: CourseClass, user_id: int) -> bool:
    row = member(db, class_id=klass.id, user_id=user_id)
    if row is None:
        return False
    db.delete(row)
    db.commit()
    return True


def people(db: Session, *, klass: CourseClass) -> list[tuple[User, ClassMember]]:
    rank = case((ClassMember.role == "instructor", 0), (ClassMember.role == "grader", 1), else_=2)
    rows = db.execute(
        select(User, ClassMember)
        .join(ClassMember, ClassMember.user_id == User.id)
        .where(ClassMember.class_id == klass.id)
        .order_by(rank, User.display_name, User.id)
    ).all()
    return [(u, m) for u, m in rows]


def instructors_left(db: Session, *, klass: CourseClass, without: int) -> int:
    """How many instructors the class keeps if `without` stops being one (a class never loses its last)."""
    rows = db.scalars(
        select(ClassMember.user_id).where(
            ClassMember.class_id == klass.id,
            ClassMember.role == "instructor",
            ClassMember.left_at.is_(None),
            ClassMember.user_id != without,
        )
    )
    return len(list(rows))


def by_code(db: Session, *, code: str) -> CourseClass | None:
    code = (code or "").strip().lower()
    if not code:
        return None
    return db.scalar(select(CourseClass).where(CourseClass.invite_code == code))


def join(db: Session, *, code: str, user_id: int) -> tuple[CourseClass, str]:
    """Join by invite code as a learner; a member keeps the role they have. Returns (class, role now)."""
    klass = by_code(db, code=code)
    if klass is None:
        raise FieldError(
            "code", f"no class has the invite code {code.strip()[:40]!r}; check it with whoever gave it to you"
        )
    have = member(db, class_id=klass.id, user_id=user_id)
    if have is not None and have.left_at is None:
        return klass, have.role
    enrol(db, klass=klass, user_id=user_id, role="learner", via="invite")
    return klass, "learner"


def join_open(db: Session, *, user_id: int) -> list[CourseClass]:
    """A new account joins every class open to registration, as a learner."""
    opened = list(db.scalars(select(CourseClass).where(CourseClass.open_registration.is_(True))))
    for klass in opened:
        enrol(db, klass=klass, user_id=user_id, role="learner", via="register", commit=False)
    db.commit()
    return opened


def rotate_invite(db: Session, *, klass: CourseClass) -> str:
    klass.invite_code = new_code()
    db.commit()
    return klass.invite_code


def mark_left(db: Session, *, klass: CourseClass, user_id: int) -> bool:
    """The person left the class (their LMS course no longer lists them): kept on the roster, marked."""
    row = member(db, class_id=klass.id, user_id=user_id)
    if row is None or row.left_at is not None:
        return False
    row.left_at = utcnow()
    db.flush()
    return True
