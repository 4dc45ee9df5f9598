"""The LMS's services a link's launches offer, called by the tool with its own signed token (OAuth2 client
credentials with a JWT assertion, pylti1p3's ServiceConnector). Each concerns the link's LMS course and its class
only (app/services/lti/contexts.py):

    sync_roster(db, link=…, key=…)    Names and Role Provisioning: every active member of the link's course is a
                                       course user (matched by `sub`) with the mapped role in its class; members the
                                       course no longer lists are marked as left (their work stays)
    send_grades(db, link=…, key=…)    Assignment and Grade Services: each released grade of the link's lesson, of a
                                       learner of that course, not yet sent goes to the column, once per saved grade
    send_practice(db, link=…, key=…)  for a link to a lesson: each of the course's learners' practice score
                                       (questions answered right at least once, of the lesson's auto-checked ones)
    send_lesson_grades(db, klass=…, lesson_id=…, key=…)  send_grades for every link of the class placed as that
                                       lesson's lab report, for the grade release to call; -> what each link said

Run by the class's instructors (its LMS page's buttons) or an operator (`python -m app lti sync-roster|...`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiException, LtiServiceException
from pylti1p3.grade import Grade as LtiGrade
from pylti1p3.lineitem import LineItem
from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector
from requests import RequestException
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.models import (
    Attempt,
    CourseClass,
    Grade,
    LabReport,
    LtiContext,
    LtiIdentity,
    LtiLink,
    LtiPlatform,
    LtiScoreSent,
    ReportVersion,
)
from app.services.errors import DomainError
from app.services.learning import lessons as lesson_service
from app.services.lti import contexts
from app.services.lti import registry as lti
from app.services.lti.tool import TimedSession, registration_of

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"


class ServiceRefused(DomainError):
    """The LMS refused or did not answer a service call; the message names the service and what it said."""


@dataclass(frozen=True)
class RosterSync:
    members: int
    created: int
    roles_changed: int
    left: int


@dataclass(frozen=True)
class GradesSent:
    sent: int
    already: int
    without_grade: int


def _connector(platform: LtiPlatform, key: lti.ToolKey) -> ServiceConnector:
    return ServiceConnector(registration_of(platform, key), requests_session=TimedSession())


def _context(db: Session, link: LtiLink) -> LtiContext:
    found = lti.link_context(db, link)
    if found is None:
        raise ServiceRefused("This link's LMS course is not known; launch the link once from the LMS.")
    return found


def recipients(db: Session, *, link: LtiLink) -> list[tuple[int, str]]:
    """(user id, LMS `sub`) of whom the link's grades and scores may go to: the learners its LMS course lists now
    (contexts.learners), with their identity on the link's own platform."""
    wanted = contexts.learners(db, context=_context(db, link))
    if not wanted:
        return []
    q = select(LtiIdentity.user_id, LtiIdentity.sub).where(
        LtiIdentity.platform_id == link.platform_id, LtiIdentity.user_id.in_(sorted(wanted))
    )
    return sorted((uid, sub) for uid, sub in db.execute(q))


def sync_roster(db: Session, *, link: LtiLink, key: lti.ToolKey) -> RosterSync:
    if not link.memberships_url:
        raise ServiceRefused(
            "This link's launches offered no roster service (Names and Role Provisioning): enable it in the "
            "LMS's registration of the course, then launch the link once."
        )
    platform = db.get(LtiPlatform, link.platform_id)
    assert platform is not None
    context = _context(db, link)
    klass = contexts.class_of(db, context)
    nrps = NamesRolesProvisioningService(_connector(platform, key), {"context_memberships_url": link.memberships_url})
    try:
        listed = nrps.get_members()
    except (LtiServiceException, LtiException, RequestException) as exc:
        raise ServiceRefused(f"The LMS's roster service refused the request: {exc}") from exc
    created = changed = 0
    active: set[int] = set()
    for member in listed:
        if not isinstance(member, dict) or not member.get("user_id"):
            continue
        sub = str(member["user_id"])[:255]
        if member.get("status", "Active") != "Active":
            continue  # Inactive or Deleted: not in the course now (marked as left below, if they were)
        user, new = lti.user_for(
            db, platform=platform, sub=sub, name=str(member.get("name") or ""), email=member.get("email")
        )
        role = contexts.class_role(member.get("roles", []))
        created += new
        changed += contexts.seen(db, context=context, user_id=user.id, role=role, commit=False)
        lti.let_grade(db, klass=klass, user=user, role=role, target=link.target)
        active.add(user.id)
    gone = set(contexts.members(db, context=context)) - active
    n_left = contexts.left(db, context=context, user_ids=gone)
    db.commit()
    return RosterSync(members=len(listed), created=created, roles_changed=changed, left=n_left)


def _latest_released(db: Session, *, lesson_id: str, user_id: int) -> Grade | None:
    q = (
        select(Grade)
        .join(ReportVersion, ReportVersion.id == Grade.version_id)
        .join(LabReport, LabReport.id == ReportVersion.report_id)
        .where(LabReport.lesson_id == lesson_id, LabReport.owner_id == user_id, Grade.released_at.is_not(None))
        .order_by(Grade.released_at.desc(), Grade.id.desc())
        .limit(1)
    )
    return db.scalars(q).first()


def _column(link: LtiLink, *, label: str) -> LineItem | None:
    """None: the link's own column (the launch named it); else one found or made by tag (the link's target)."""
    if link.lineitem_url:
        return None
    if LINEITEM_SCOPE not in (link.ags_scopes or []):
        raise ServiceRefused("The LMS gave no gradebook column for this link and no right to create one.")
    column = LineItem().set_tag(link.target).set_label(label).set_score_maximum(100)
    return column.set_resource_link_id(link.resource_link_id)


def _ags(link: LtiLink, platform: LtiPlatform, key: lti.ToolKey) -> AssignmentsGradesService:
    if SCORE_SCOPE not in (link.ags_scopes or []) or not (link.lineitem_url or link.lineitems_url):
        raise ServiceRefused(
            "This link's launches offered no gradebook service (Assignment and Grade Services with the score "
            "scope): enable it in the LMS's registration of the course, then launch the link once."
        )
    data = {"scope": link.ags_scopes, "lineitem": link.lineitem_url, "lineitems": link.lineitems_url}
    return AssignmentsGradesService(_connector(platform, key), data)  # type: ignore[arg-type]


def _right(db: Session, *, lesson_id: str, user_ids: list[int]) -> dict[int, int]:
    """{user id: distinct questions of the lesson answered right at least once}."""
    q = (
        select(Attempt.user_id, func.count(func.distinct(Attempt.question_id)))
        .where(Attempt.lesson_id == lesson_id, Attempt.status == "correct", Attempt.user_id.in_(user_ids or [0]))
        .group_by(Attempt.user_id)
    )
    return {uid: int(n) for uid, n in db.execute(q)}


def send_practice(db: Session, *, link: LtiLink, key: lti.ToolKey) -> int:
    """The current practice score of each learner of the link's LMS course (`recipients`); returns how many were
    sent. Each send is the score now (the LMS keeps the latest by timestamp), so sending again after more practice
    updates it."""
    if not link.target.startswith("lesson:"):
        raise ServiceRefused(f"Practice scores go to links that open a lesson; this one opens {link.target}.")
    platform = db.get(LtiPlatform, link.platform_id)
    assert platform is not None
    lesson_id = link.target.split(":", 1)[1]
    found = lesson_service.current(db, lesson_id=lesson_id)
    if found is None:
        raise ServiceRefused(f"The lesson {lesson_id!r} is not published any more.")
    checked = sum(1 for q in found.lesson.questions.values() if q.kind != "free_response")
    if not checked:
        raise ServiceRefused(f"The lesson {lesson_id!r} has no automatically checked questions to score.")
    ags = _ags(link, platform, key)
    column = _column(link, label=f"Practice: {found.lesson.title}")
    to = recipients(db, link=link)
    right = _right(db, lesson_id=lesson_id, user_ids=[uid for uid, _ in to])
    sent = 0
    for user_id, sub in to:
        score = (
            LtiGrade()
            .set_score_given(float(min(right.get(user_id, 0), checked)))
            .set_score_maximum(float(checked))
            .set_activity_progress("InProgress")
            .set_grading_progress("FullyGraded")
            .set_user_id(sub)
            .set_timestamp(lti.utcnow().isoformat())
        )
        try:
            ags.put_grade(score, column)
        except (LtiServiceException, LtiException, RequestException) as exc:
            raise ServiceRefused(f"The LMS's gradebook refused a practice score after {sent} were sent: {exc}") from exc
        sent += 1
    return sent


def send_grades(db: Session, *, link: LtiLink, key: lti.ToolKey) -> GradesSent:
    """Released report grades of the link's lesson, of the learners of its LMS course (`recipients`), to its
    gradebook column, as points of the rubric's total."""
    platform = db.get(LtiPlatform, link.platform_id)
    assert platform is not None
    lesson_id = link.target.split(":", 1)[1]
    ags = _ags(link, platform, key)
    column = _column(link, label=f"Lab report: {lesson_id}")
    sent = already = without = 0
    for user_id, sub in recipients(db, link=link):
        grade = _latest_released(db, lesson_id=lesson_id, user_id=user_id)
        if grade is None:
            without += 1
            continue
        done = db.scalar(
            select(LtiScoreSent.id).where(LtiScoreSent.link_id == link.id, LtiScoreSent.grade_id == grade.id)
        )
        if done is not None:
            already += 1
            continue
        score = (
            LtiGrade()
            .set_score_given(grade.total)
            .set_score_maximum(grade.max_total)
            .set_activity_progress("Completed")
            .set_grading_progress("FullyGraded")
            .set_user_id(sub)
            .set_timestamp(grade.released_at.isoformat() if grade.released_at else grade.created_at.isoformat())
        )
        if grade.feedback:
            score.set_comment(grade.feedback[:1000])
        try:
            ags.put_grade(score, column)
        except (LtiServiceException, LtiException, RequestException) as exc:
            db.commit()  # the scores sent so far stay recorded
            raise ServiceRefused(f"The LMS's gradebook refused a score after {sent} were sent: {exc}") from exc
        db.add(LtiScoreSent(link_id=link.id, grade_id=grade.id, user_id=user_id))
        db.flush()
        sent += 1
    db.commit()
    return GradesSent(sent=sent, already=already, without_grade=without)


def send_lesson_grades(db: Session, *, klass: CourseClass, lesson_id: str, key: lti.ToolKey) -> list[str]:
    """After grades of `lesson_id` are released in `klass`: send them to every gradebook column of a link to its lab
    report in an LMS course of the class. A refusing or unreachable LMS is reported in the answer, never raised, so a
    release is never undone by it; what was not sent is sent by the next release or the class's LMS page's button."""
    said = []
    for row in lti.links(db, klass=klass):
        if row.target != f"lab:{lesson_id}" or SCORE_SCOPE not in (row.ags_scopes or []):
            continue
        where = row.context_title or row.context_id
        try:
            sent = send_grades(db, link=row, key=key)
        except ServiceRefused as exc:
            said.append(f"{where}: {exc.message}")
        else:
            said.append(f"{where}: {sent.sent} grades sent to the LMS")
    return said
