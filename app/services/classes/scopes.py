"""What a staff member may see of learners: the learners of a class they hold a staff role in, in its lessons.

    staff_scope(db, user=…, slug=…, roles=…)  -> Scope | None: the class in the address, if the user is its staff
    staff_scopes(db, user=…)                  -> [Scope]: every class the user is staff of (reports, jobs)
    Scope.learners()                          -> SELECT of the class's learners' user ids (those who left included)
    Scope.lessons_where(column)               -> the condition "this lesson is one the class offers"
    instructs(db, user=…, owner_id=…)         -> whether the user instructs a class the owner learns in

Every service that reads learners' work for staff takes a Scope, so which learners and lessons a page covers is
decided here, once. A learner who left keeps their work in the class (their roster row says so); a staff member
who left sees nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, exists, select, true
from sqlalchemy.orm import Session, aliased

from app.core.class_models import STAFF_ROLES
from app.core.models import ClassMember, CourseClass, User


@dataclass(frozen=True)
class Scope:
    """A staff member looking at one class."""

    klass: CourseClass
    role: str  # instructor | grader
    user: User

    @property
    def instructor(self) -> bool:
        return self.role == "instructor"

    @property
    def class_id(self) -> int:
        return self.klass.id

    def learners(self) -> Select:
        return select(ClassMember.user_id).where(ClassMember.class_id == self.klass.id, ClassMember.role == "learner")

    def lessons_where(self, column) -> ColumnElement[bool]:
        ids = self.klass.lesson_ids
        return true() if ids is None else column.in_(sorted(ids) or [""])

    def offers(self, lesson_id: str) -> bool:
        return self.klass.offers(lesson_id)


def staff_scope(
    db: Session, *, user: User, slug: str, roles: tuple[str, ...] = STAFF_ROLES
) -> tuple[CourseClass | None, Scope | None]:
    """(the class of `slug`, the user's scope in it when they hold one of `roles` there now)."""
    klass = db.scalar(select(CourseClass).where(CourseClass.slug == slug))
    if klass is None:
        return None, None
    role = db.scalar(
        select(ClassMember.role).where(
            ClassMember.class_id == klass.id, ClassMember.user_id == user.id, ClassMember.left_at.is_(None)
        )
    )
    if role not in roles:
        return klass, None
    return klass, Scope(klass, role, user)


def staff_scopes(db: Session, *, user: User, roles: tuple[str, ...] = STAFF_ROLES) -> list[Scope]:
    rows = db.execute(
        select(CourseClass, ClassMember.role)
        .join(ClassMember, ClassMember.class_id == CourseClass.id)
        .where(ClassMember.user_id == user.id, ClassMember.role.in_(roles), ClassMember.left_at.is_(None))
        .order_by(CourseClass.id)
    ).all()
    return [Scope(k, role, user) for k, role in rows]


def instructs(db: Session, *, user_id: int, owner_id: int) -> bool:
    """Whether `user_id` instructs a class that `owner_id` is a learner of."""
    staff, learner = aliased(ClassMember), aliased(ClassMember)
    q = select(
        exists().where(
            staff.user_id == user_id,
            staff.role == "instructor",
            staff.left_at.is_(None),
            learner.class_id == staff.class_id,
            learner.user_id == owner_id,
            learner.role == "learner",
        )
    )
    return bool(db.scalar(q))


def is_staff_anywhere(db: Session, *, user_id: int) -> bool:
    q = select(
        exists().where(ClassMember.user_id == user_id, ClassMember.role.in_(STAFF_ROLES), ClassMember.left_at.is_(None))
    )
    return bool(db.scalar(q))
