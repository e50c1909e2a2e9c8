"""Who may do what: the one authorization table that every door consults.

A caller is an API key (or a person in the dashboard, who acts as a write key of theirs
would). Its **rights** are its user's *current* role where the key points, capped by the
key's access: a `read` key reads, whatever its user's role; a user with no role there
has no rights at all (a removed member, a key made for someone else's project).

An object's **reach** says for whom it is kept, seen from the caller:

| reach         | kept for                                                    |
|---------------|-------------------------------------------------------------|
| `tenant`      | the whole tenant (no project): it reaches every project     |
| `project`     | the project, no participant in particular                   |
| `participant` | one end user, and the caller's key is bound to no one       |
| `own`         | the end user the caller's key is bound to                   |
| `other`       | another end user than the one the caller's key is bound to  |

Every object has one: a fact by its project and participant (a fact in a conversation is
kept for the conversation's participant), a conversation and its messages by their
participant (one with no participant was held with someone unknown: it is the project's
for keys bound to no one, and `other` for a key bound to one end user, since it may be
anybody's), a workspace's entries, task list and tool calls by the participant the
saving key was bound to, an approval by its fact, a profile or a person's export by the
participant it names, an agent, a key, a member or a retention policy by its project.

An **act** is what the caller does to it:

- `read`: see it (pending or rejected facts take `review`);
- `write`: create, change or delete it (a fact, a message, a workspace entry, a task list);
- `review`: verify a fact, see what waits for approval and decide on it;
- `admin`: declare agents, manage keys, members and retention, export or erase a person.

`TABLE` maps (act, reach) to the least role it takes and whether a key bound to one
participant may do it. Changing an object takes the rights that creating it took: a
tenant-wide fact kept for no one reaches every project, so only an admin writes, verifies or
approves one. An object kept for a participant is theirs wherever it lives (`reach_of`):
the participant rule decides, as for any of their facts (the write path makes no tenant-wide
fact for a participant; tests/test_visibility.py holds the SQL and the ORM to this).
Nobody reaches `other`. Reads in SQL (`fact_condition`, `participant_sql`) are compiled
from the same table, so a list, a search and a check can never disagree.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from django.db.models import Q

from core.errors import Forbidden, NotFound, ParticipantNotAllowed

if TYPE_CHECKING:
    from accounts.services import Principal


class Act(StrEnum):
    READ = "read"
    WRITE = "write"
    REVIEW = "review"
    ADMIN = "admin"


class Reach(StrEnum):
    TENANT = "tenant"
    PROJECT = "project"
    PARTICIPANT = "participant"
    OWN = "own"
    OTHER = "other"


# Roles by rank; a role includes everything of the roles before it (accounts.models.ROLE_RANK).
VIEWER, WRITER, REVIEWER, ADMIN = "viewer", "writer", "reviewer", "admin"
RANK = {None: 0, VIEWER: 1, WRITER: 2, REVIEWER: 3, ADMIN: 4}

# (act, reach) -> (least role, may a participant-bound key do it). Absent: nobody may.
TABLE: dict[tuple[Act, Reach], tuple[str, bool]] = {
    (Act.READ, Reach.TENANT): (VIEWER, True),
    (Act.READ, Reach.PROJECT): (VIEWER, True),
    (Act.READ, Reach.PARTICIPANT): (WRITER, False),  # naming an end user takes write access
    (Act.READ, Reach.OWN): (VIEWER, True),
    (Act.WRITE, Reach.TENANT): (ADMIN, False),
    (Act.WRITE, Reach.PROJECT): (WRITER, False),  # a bound key changes only its own participant's
    (Act.WRITE, Reach.PARTICIPANT): (WRITER, False),
    (Act.WRITE, Reach.OWN): (WRITER, True),
    (Act.REVIEW, Reach.TENANT): (ADMIN, False),
    (Act.REVIEW, Reach.PROJECT): (REVIEWER, False),
    (Act.REVIEW, Reach.PARTICIPANT): (REVIEWER, False),
    (Act.REVIEW, Reach.OWN): (REVIEWER, True),
    (Act.ADMIN, Reach.TENANT): (ADMIN, False),
    (Act.ADMIN, Reach.PROJECT): (ADMIN, False),  # agents, keys, members, retention: not for an end user's app
    (Act.ADMIN, Reach.PARTICIPANT): (ADMIN, False),
    (Act.ADMIN, Reach.OWN): (ADMIN, True),  # a person's own export and erasure
}


def rights(*, role: str | None, access: str) -> int:
    """The rank a key acts with: its user's role, capped at viewer for a read key; 0 without a role."""
    rank = RANK[role]
    return min(rank, RANK[VIEWER]) if access == "read" else rank


def decide(*, role: str | None, access: str, bound: bool, act: Act, reach: Reach) -> bool:
    """The table itself, on plain values: may such a caller do `act` to an object of `reach`?"""
    rule = TABLE.get((act, reach))
    if rule is None:
        return False
    least, bound_may = rule
    rank = rights(role=role, access=access)
    return rank > 0 and rank >= RANK[least] and (bound_may or not bound)


def allows(principal: Principal, act: Act, reach: Reach) -> bool:
    return decide(
        role=principal.role, access=principal.access, bound=principal.participant_id is not None, act=act, reach=reach
    )


def reach_of(principal: Principal, *, project_id, participant_id: str | None, unattributed: bool = False) -> Reach:
    """The reach of an object kept in `project_id` (None: tenant-wide) for `participant_id`.
    `unattributed`: an object with no participant is someone unknown's (a conversation)."""
    if participant_id is None:
        if unattributed and principal.participant_id is not None:
            return Reach.OTHER
        return Reach.TENANT if project_id is None else Reach.PROJECT
    if principal.participant_id is None:
        return Reach.PARTICIPANT
    return Reach.OWN if participant_id == principal.participant_id else Reach.OTHER


def require(principal: Principal, act: Act, reach: Reach) -> None:
    """Raise unless the table allows it: 403 `forbidden`, or `participant-not-allowed`
    when it is the participant the caller may not name."""
    if allows(principal, act, reach):
        return
    if principal.role is None:
        raise Forbidden("The key's user has no role here (a removed member?): the key has no rights.")
    if reach is Reach.OTHER:
        raise ParticipantNotAllowed("This key is bound to another participant.")
    least, bound_may = TABLE.get((act, reach), (ADMIN, False))
    if principal.participant_id is not None and not bound_may:
        if reach is Reach.PROJECT or reach is Reach.TENANT:
            raise Forbidden(f"A key bound to one participant may not {act} what is kept for the whole {reach}.")
    if reach is Reach.PARTICIPANT and act is Act.READ:
        raise ParticipantNotAllowed("Naming a participant takes a key bound to them or write access to the project.")
    if principal.access == "read" and RANK[least] > RANK[VIEWER]:
        raise Forbidden("This is a read key; this needs a write key.")
    if reach is Reach.TENANT and act is not Act.READ:
        raise Forbidden(f"What is kept for the whole tenant reaches every project: to {act} it takes the admin role.")
    raise Forbidden(f"This needs the {least} role; the key's user does not have it here.")


def require_object(principal: Principal, act: Act, *, project_id, participant_id: str | None, unattributed: bool = False) -> None:
    """`require` for one object the caller has found; an object of another participant is
    not revealed (404)."""
    reach = reach_of(principal, project_id=project_id, participant_id=participant_id, unattributed=unattributed)
    if reach is Reach.OTHER:
        raise NotFound("Nothing of that id here.")
    require(principal, act, reach)


# --- reads, compiled from the table ---------------------------------------------------------------


def fact_condition(principal: Principal, act: Act = Act.READ, *, pending_statuses=("pending", "rejected")) -> Q:
    """The rows of facts (or anything with `project_id` and `participant_id`) the caller
    may `act` on; for `read`, pending and rejected ones only where it may also `review`."""
    bound = principal.participant_id
    reaches = {
        # Kept for no one: tenant-wide or the project's. A row kept for someone is read on the
        # participant's terms wherever it lives (reach_of), a tenant-wide one too.
        Reach.TENANT: Q(project_id__isnull=True, participant_id__isnull=True),
        Reach.PROJECT: Q(project_id__isnull=False, participant_id__isnull=True),
    }
    if bound is None:
        reaches[Reach.PARTICIPANT] = Q(participant_id__isnull=False)
    else:
        reaches[Reach.OWN] = Q(participant_id=bound)
    condition = Q(pk__in=[])
    for reach, where in reaches.items():
        if not allows(principal, act, reach):
            continue
        if act is Act.READ and not allows(principal, Act.REVIEW, reach):
            where &= ~Q(status__in=list(pending_statuses))
        condition |= where
    return condition


def _visible(principal: Principal, act: Act, unattributed: bool) -> tuple[bool, bool]:
    """(may the caller `act` on rows kept for no participant, on rows kept for someone): for a
    key bound to no one, someone is any participant; for a bound key, its own."""
    bound = principal.participant_id is not None
    nobody = not (unattributed and bound) and allows(principal, act, Reach.PROJECT)  # else Reach.OTHER
    return nobody, allows(principal, act, Reach.OWN if bound else Reach.PARTICIPANT)


def participant_sql(principal: Principal, column: str, params: dict, *, act: Act = Act.READ, unattributed: bool = False) -> str:
    """The SQL condition on a `participant_id` column for rows the caller may `act` on,
    within a project (the rows kept for no one are the project's, or with `unattributed`
    someone unknown's; a tenant-wide row is read on the same terms, see TABLE). Puts the
    bound participant into `params["bound"]`."""
    nobody, someone = _visible(principal, act, unattributed)
    if someone and principal.participant_id is not None:
        params["bound"] = principal.participant_id
        mine = f"{column} = %(bound)s"
    else:
        mine = f"{column} IS NOT NULL"
    if someone and nobody:
        return "TRUE" if principal.participant_id is None else f"({column} IS NULL OR {mine})"
    if someone:
        return mine
    return f"{column} IS NULL" if nobody else "FALSE"


def participant_q(principal: Principal, field: str = "participant_id", *, act: Act = Act.READ, unattributed: bool = False) -> Q:
    """`participant_sql` as a Django condition, for the ORM's reads (conversations, workspaces)."""
    nobody, someone = _visible(principal, act, unattributed)
    bound = principal.participant_id
    mine = Q(**({field: bound} if bound is not None else {f"{field}__isnull": False})) if someone else Q(pk__in=[])
    return mine | Q(**{f"{field}__isnull": True}) if nobody else mine
