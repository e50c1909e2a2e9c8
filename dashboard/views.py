"""Dashboard pages: thin doors onto the same services and selectors the API calls.

Every project page is wrapped by `dashboard.access.project_page` (signed in, a role in
the project, 404 elsewhere, 403 below the page's role) and receives `place`, whose
principal is passed to each service. Changes are POSTs (CSRF-protected) that redirect
back with a message; what a service refuses is shown as it says it.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.db.models import CharField, Count, Q, Value
from django.shortcuts import redirect, render
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.models import Role
from accounts.retention import retention_policy_for, retention_policy_set
from accounts.selectors import apikeys_list, members_list, projects_for_user
from accounts.services import apikey_create, apikey_revoke, membership_remove, membership_set, role_for
from agent import services as agent_services
from agent.conversations import conversations_visible, messages_list
from agent.explain import context_left_out
from agent.models import Message, MessageRole
from approvals.admin import highlighted
from approvals.gate import approval_current_reasons
from approvals.models import ApprovalStatus
from approvals.selectors import approval_get, approvals_list, approvals_replacing, approvals_visible
from approvals.services import approval_grant, approval_reject
from core.errors import ApplicationError, ValidationFailed
from core.pagination import paginate
from core.times import parse_time
from dashboard import forms, presenters
from dashboard.access import LAST_PROJECT, Place, not_found, page, project_page, require
from dashboard.activity import project_activity, read_latency
from facts import selectors as fact_selectors, services as fact_services
from facts.filters import FactFilter
from facts.models import Status, Trust
from retrieval.search import Run, facts_retrieve, parse_intent
from workspaces.services import memory_block_for, memory_graph, memory_namespaces, workspace

logger = logging.getLogger(__name__)

PAGE_SIZE = 25
SEARCH_LIMIT = 50  # ranked search shows the best 50 (ranked reads are top-k, not paginated)


def _errors_to_form(form, error: ValidationFailed) -> None:
    fields = getattr(error, "errors", {}) or {}
    placed = False
    for name, problems in fields.items():
        if name in form.fields:
            for problem in problems:
                form.add_error(name, problem)
            placed = True
    if not placed:
        form.add_error(None, error.detail)


# --- signing in, the start page, the switcher ------------------------------------------------


class SignInView(LoginView):
    template_name = "dashboard/login.html"
    redirect_authenticated_user = True


class SignOutView(LogoutView):
    next_page = "dashboard:login"


def start(request):
    """`/`: signed-in people go on to the dashboard; everyone else gets the start page with its links."""
    if request.user.is_authenticated:
        return redirect("dashboard:home")
    return render(request, "home.html")


@login_required
def home(request):
    """Back to the project used last, else the first one; a page that says so when there is none."""
    places = projects_for_user(user_id=request.user.pk)
    if not places:
        return page(request, None, "dashboard/no_projects.html")
    refs = {f"{project.tenant.slug}/{project.slug}": project for project, _ in places}
    project = refs.get(request.session.get(LAST_PROJECT)) or places[0][0]
    return redirect("dashboard:overview", project.tenant.slug, project.slug)


SECTIONS = {"overview", "facts", "approvals", "conversations", "agents", "memory", "keys", "members", "retention"}


@login_required
def switch(request):
    """The project switcher: the same section in another project (404 where one has no role)."""
    tenant, _, project = request.GET.get("to", "").partition("/")
    section = request.GET.get("section") if request.GET.get("section") in SECTIONS else "overview"
    refs = {(p.tenant.slug, p.slug) for p, _ in projects_for_user(user_id=request.user.pk)}
    if (tenant, project) not in refs:
        return not_found(request)
    return redirect(f"dashboard:{section}", tenant, project)


# --- overview ------------------------------------------------------------------------------------

# A working-memory entry (workspaces.services): a fact with a namespace and a key, outside any
# conversation. The facts list and the overview keep them apart from the project's facts.
WORKING_MEMORY = Q(namespace__isnull=False, key__isnull=False, conversation_id__isnull=True)


@project_page(section="overview")
def overview(request, place: Place):
    principal = place.principal
    live = fact_selectors.facts_list(principal=principal)
    context = {
        "live_count": live.exclude(WORKING_MEMORY).count(),  # working-memory entries are counted apart
        "working_memory_count": live.filter(WORKING_MEMORY).count(),
        "recent": live.exclude(WORKING_MEMORY).defer("embedding", "search_vector").order_by("-updated_at", "-id")[:8],
        "agent_count": agent_services.agents_list(principal=principal, project_id=place.project.id).count(),
        "conversation_count": conversations_visible(principal=principal).filter(project_id=place.project.id).count(),
        "namespaces": memory_namespaces(principal=principal, project_id=place.project.id)[:5],
        "activity": [*project_activity(principal=principal, project_id=place.project.id, reviewer=place.is_reviewer),
                     read_latency(project_id=place.project.id)],
    }
    return page(request, place, "dashboard/overview.html", context)


# --- facts ---------------------------------------------------------------------------------------


@project_page(section="facts")
def facts(request, place: Place):
    """Browse with the filters of GET /v1/facts, or rank with the retrieval service (keyword, meaning, both)."""
    principal = place.principal
    form = forms.FactSearchForm(request.GET or None, initial={"status": Status.ACTIVE})
    context: dict = {"form": form, "rows": [], "hits": None, "warnings": [], "next_cursor": None}
    valid = not form.is_bound or form.is_valid()
    data = form.cleaned_data if form.is_bound and valid else {}
    if valid:
        participant = data.get("participantId") or None
        try:
            principal.require_participant(participant)
            if form.is_bound and form.ranked():
                intent = {"scope": "same-user" if participant else "same-project", "mode": data["mode"], "limit": SEARCH_LIMIT}
                if data.get("type"):
                    intent["types"] = [data["type"]]
                run = Run(principal=principal, query=data["q"], participant_id=participant, project_id=place.project.id, who="This search")
                result = facts_retrieve(run=run, intents=[parse_intent(intent)])
                context.update(hits=result.hits, warnings=result.warnings)
            else:
                params = {name: value for name, value in data.items() if value and name != "mode"}
                filterset = FactFilter(params, queryset=fact_selectors.facts_list(principal=principal, status=params.get("status") or Status.ACTIVE))
                if not filterset.is_valid():
                    raise ValidationFailed("Check the filters.", errors={k: [str(m) for m in v] for k, v in filterset.errors.items()})
                queryset = filterset.qs.select_related("project").defer("embedding", "search_vector")
                if not params.get("namespace"):  # working memory has its own page, unless a namespace is asked for
                    context["working_memory_count"] = queryset.filter(WORKING_MEMORY).count()
                    queryset = queryset.exclude(WORKING_MEMORY)
                rows, next_cursor = paginate(queryset, params={"limit": PAGE_SIZE, "cursor": request.GET.get("cursor")})
                people = presenters.usernames(presenters.actor_ids(*[f.attributed_to for f in rows]))
                context.update(rows=rows, next_cursor=next_cursor, total=queryset.count(), people=people)
        except ValidationFailed as error:
            _errors_to_form(form, error)
        except ApplicationError as error:  # participant-not-allowed: a viewer names an end user
            form.add_error("participantId", error.detail)
    query = request.GET.copy()
    query.pop("cursor", None)
    context["query"] = query.urlencode()
    return page(request, place, "dashboard/facts.html", context)


@project_page(section="facts")
def fact(request, place: Place, fact_id):
    """One fact: content, provenance, trust, expiry; its revision timeline; an earlier state by version or time."""
    principal = place.principal
    current, revisions = fact_selectors.fact_revisions(principal=principal, fact_id=fact_id)
    shown, shown_note = current, None
    as_of = forms.AsOfForm(request.GET if "at" in request.GET else None)
    moment = None
    if not request.GET.get("revision") and (raw := request.GET.get("asOf")):  # the timeline's links carry one
        if (moment := parse_time(raw)) is None:
            raise ValidationFailed(f"asOf must be an ISO 8601 time with a zone, e.g. 2026-10-01T00:00:00Z, not {raw[:40]!r}.")
    try:
        if request.GET.get("revision"):
            try:
                version = int(request.GET["revision"])
            except ValueError:
                version = 0
            _, shown = fact_selectors.fact_revision(principal=principal, fact_id=current.id, version=version)
        elif moment is not None:
            _, shown = fact_selectors.fact_as_of(principal=principal, fact_id=current.id, at=moment)
            shown_note = moment
        elif as_of.is_bound and as_of.is_valid():
            _, shown = fact_selectors.fact_as_of(principal=principal, fact_id=current.id, at=as_of.moment())
            shown_note = as_of.moment()
    except ApplicationError as error:  # no such revision, nothing current then
        messages.error(request, error.detail)
        shown, shown_note = current, None
    approvals = approvals_visible(principal=principal).filter(fact_id=current.id).order_by("-created_at") if place.is_reviewer else []
    people = presenters.usernames(
        presenters.actor_ids(current.attributed_to, *[r.recorded_by for r in revisions], *[r.invalidated_by for r in revisions])
        | {r.verified_by for r in revisions if r.verified_by}
    )
    status = fact_selectors.effective_status(current)
    context = {
        "can_verify": place.is_reviewer and status in (Status.ACTIVE, Status.PENDING) and not (current.trust == Trust.VERIFIED and current.expires_at is None),
        "can_delete": place.is_writer and current.status != Status.DELETED,
        "fact": current, "shown": shown, "shown_note": shown_note, "is_current": shown is current,
        "status": status, "steps": presenters.timeline(revisions),
        "people": people, "as_of": as_of if as_of.is_bound else forms.AsOfForm(), "approvals": approvals,
        "content": presenters.pretty(shown.content),
    }
    return page(request, place, "dashboard/fact.html", context)


def _fact_action(request, place: Place, fact_id, *, role: str, template: str, act, done: str, back_to_list: bool = False):
    """GET: the confirmation page; POST: the service, then back with what it did (or why not)."""
    require(place, role)
    current = fact_selectors.fact_get(principal=place.principal, fact_id=fact_id)
    if request.method != "POST":
        return page(request, place, template, {"fact": current, "status": fact_selectors.effective_status(current)})
    try:
        changed = act(principal=place.principal, fact_id=current.id)
    except ApplicationError as error:
        if error.status in (403, 404):
            raise
        messages.error(request, error.detail)
    else:
        messages.success(request, done.format(version=changed.version))
    if back_to_list:
        return redirect(place.url("facts"))
    return redirect(place.url("fact", current.id))


@project_page(Role.REVIEWER, section="facts")
def fact_verify(request, place: Place, fact_id):
    return _fact_action(
        request, place, fact_id, role=Role.REVIEWER, template="dashboard/fact_verify.html",
        act=fact_services.fact_verify, done="Verified: the fact is trusted and no longer expires (version {version}).",
    )


@project_page(Role.WRITER, section="facts")
def fact_delete(request, place: Place, fact_id):
    return _fact_action(
        request, place, fact_id, role=Role.WRITER, template="dashboard/fact_delete.html",
        act=fact_services.fact_delete, done="Deleted: no read sees the fact any more; its revisions are kept until retention purges them.",
        back_to_list=True,
    )


@project_page(Role.WRITER, section="facts")
def fact_supersede(request, place: Place, fact_id):
    """Correct a fact: its next revision with new content, against the version read (a stale
    one is refused, as the API's expectVersion). "Preview" shows the diff; "Save" writes it."""
    current = fact_selectors.fact_get(principal=place.principal, fact_id=fact_id)
    form = forms.SupersedeForm(request.POST or None, initial={"content": presenters.pretty(current.content), "expect_version": current.version})
    diff = None
    if request.method == "POST" and form.is_valid():
        content, expected = form.cleaned_data["content"], form.cleaned_data["expect_version"]
        diff = presenters.line_diff(presenters.pretty(current.content), presenters.pretty(content))
        if "save" in request.POST:
            try:
                changed = fact_services.fact_supersede(principal=place.principal, fact_id=current.id, content=content, expect_version=expected)
            except ApplicationError as error:
                if error.status in (403, 404):
                    raise
                if error.status == 409:  # someone changed it meanwhile: show theirs, keep ours in the box
                    current = fact_selectors.fact_get(principal=place.principal, fact_id=fact_id)
                    diff = presenters.line_diff(presenters.pretty(current.content), presenters.pretty(content))
                    form = forms.SupersedeForm({"content": request.POST["content"], "expect_version": current.version})
                    form.is_valid()
                form.add_error("content", error.detail)
            else:
                messages.success(request, f"Saved version {changed.version}; version {changed.version - 1} stays in the history.")
                return redirect(place.url("fact", current.id))
    context = {"fact": current, "status": fact_selectors.effective_status(current), "form": form, "diff": diff}
    return page(request, place, "dashboard/fact_supersede.html", context)


# --- a person (participant): everything kept for them, export and erasure ------------------------


@project_page(Role.ADMIN, section="facts")
def person(request, place: Place, participant_id: str):
    """One end user's facts, conversations, approvals and working memory (privacy.erasure, as the API's export)."""
    from django.http import JsonResponse

    from privacy import erasure
    from privacy.views import export_to_dict

    found = erasure.participant_data(principal=place.principal, participant_id=participant_id)
    if request.GET.get("format") == "json":
        response = JsonResponse(export_to_dict(found), json_dumps_params={"ensure_ascii": False, "indent": 1})
        response["Content-Disposition"] = f'attachment; filename="participant-{participant_id}.json"'
        response["Cache-Control"] = "no-store"
        logger.info("dashboard: %s exported participant %r of project %s", request.user.username, participant_id, place.ref)
        return response
    memory = [f for f in found.facts if f.namespace and f.key and f.conversation_id is None]
    context = {
        "participant_id": participant_id, "data": found, "facts": [f for f in found.facts if f not in memory],
        "memory": memory, "messages_count": sum(len(m) for m in found.messages.values()),
    }
    return page(request, place, "dashboard/person.html", context)


@project_page(Role.ADMIN, section="facts")
def person_erase(request, place: Place, participant_id: str):
    """Erase everything kept for one end user, after typing their id; logged with who did it."""
    from privacy import erasure

    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != participant_id:
            messages.error(request, f"Type {participant_id} to confirm: nothing was erased.")
        else:
            done = erasure.participant_erase(principal=place.principal, participant_id=participant_id)
            logger.info("dashboard: %s erased participant %r of project %s: %s", request.user.username, participant_id, place.ref, done.counts)
            counts = ", ".join(f"{n} {what}" for what, n in done.counts.items() if n)
            messages.success(request, f"Erased everything kept for {participant_id}: {counts or 'nothing was kept'}.")
            return redirect(place.url("facts"))
    return page(request, place, "dashboard/person_erase.html", {"participant_id": participant_id})


# --- approvals -----------------------------------------------------------------------------------


def _decide(place: Place, approval_id, decision: str, note: str | None):
    decide = approval_grant if decision == "approve" else approval_reject
    return decide(principal=place.principal, approval_id=approval_id, note=note or None)


def _asked_in(principal, approvals) -> dict:
    """For each approval asked during a conversation (its origin): the conversation, if the
    reviewer may read it, and the last thing its user said before the agent asked."""
    wanted = {a.id: a.origin["conversationId"] for a in approvals if a.origin and a.origin.get("conversationId")}
    if not wanted:
        return {}
    conversations = {str(c.id): c for c in conversations_visible(principal=principal).filter(id__in=set(wanted.values()))}
    readable = [(a, conversations[wanted[a.id]]) for a in approvals if wanted.get(a.id) in conversations]
    if not readable:
        return {}
    # One statement for the page: each approval's last user message, a query of one row apiece
    # (the conversation's sequence index, read backwards), joined by UNION ALL.
    last = [
        Message.objects.filter(conversation_id=conversation.id, role=MessageRole.USER, created_at__lte=a.created_at)
        .order_by("-sequence").values_list(Value(str(a.id), output_field=CharField()), "text")[:1]
        for a, conversation in readable
    ]
    said = dict(last[0].union(*last[1:], all=True))
    return {a.id: {"conversation": conversation, "user_message": said.get(str(a.id))} for a, conversation in readable}


def _same_requests(items: list[dict]) -> list[list[dict]]:
    """The page's pending approvals that ask the same thing on the same terms, together, in
    the order the first of each was asked: one decision answers them all. The same text, type,
    reach (tenant-wide or the project's) and reasons; a keyed fact stays alone, since each
    replaces its own slot's value. Everything the card shows is then true of every member."""
    groups: dict[tuple, list[dict]] = {}
    for item in items:
        approval = item["approval"]
        fact = approval.fact
        alike = approval.status == ApprovalStatus.PENDING and fact.key is None
        rules = tuple(sorted({(r.get("rule"), r.get("match")) for r in approval.reasons}))
        same = (fact.type, fact.content_hash, fact.project_id is None, rules) if alike else approval.id
        groups.setdefault(same, []).append(item)
    # The card shows the request that says where it was asked, if any of them does.
    return [sorted(group, key=lambda item: item["asked_in"] is None) for group in groups.values()]


@project_page(Role.REVIEWER, section="approvals")
def approvals(request, place: Place):
    """The queue: each fact's text with what triggered the rules marked; decide one by one or in bulk."""
    principal = place.principal
    if request.method == "POST":
        # A box or form of the same requests carries their ids joined by commas.
        ids = [part for value in request.POST.getlist("ids") for part in value.split(",") if part]
        form = forms.BulkDecisionForm({**request.POST.dict(), "ids": ids} if ids else request.POST, ids=ids)
        if not ids:
            messages.error(request, "Select the approvals to decide first.")
        elif form.is_valid():
            done, skipped = 0, []
            for approval_id in form.cleaned_data["ids"]:
                try:
                    _decide(place, approval_id, form.cleaned_data["decision"], form.cleaned_data["note"])
                    done += 1
                except ApplicationError as error:
                    skipped.append(f"{approval_id[:8]}: {error.detail}")
            verb = "Approved" if form.cleaned_data["decision"] == "approve" else "Rejected"
            if done:
                messages.success(request, f"{verb} {done} of {len(ids)}.")
            for line in skipped:
                messages.warning(request, f"Skipped {line}")
        else:
            messages.error(request, "Choose approve or reject.")
        return redirect(place.url("approvals") + ("?" + request.GET.urlencode() if request.GET else ""))
    status = request.GET.get("status") or ApprovalStatus.PENDING
    statuses = {value for value, _ in forms.APPROVAL_STATUSES}
    if status not in statuses:
        status = ApprovalStatus.PENDING
    queryset = approvals_list(principal=principal, status=None if status == "all" else status, vectors=True).select_related("project")
    rows, next_cursor = paginate(queryset, params={"limit": PAGE_SIZE, "cursor": request.GET.get("cursor")})
    replacing = approvals_replacing(approvals=rows)
    asked_in = _asked_in(principal, rows)
    items = [
        {
            "approval": a, "text": highlighted(a.fact.text, approval_current_reasons(approval=a)),
            "form": forms.DecisionForm(prefix=str(a.id)), "replaces": replacing.get(a.id), "asked_in": asked_in.get(a.id),
        }
        for a in rows
    ]
    people = presenters.usernames(presenters.actor_ids(*[a.decided_by for a in rows]))
    context = {
        "groups": _same_requests(items), "status": status, "statuses": forms.APPROVAL_STATUSES, "next_cursor": next_cursor,
        "people": people,
    }
    return page(request, place, "dashboard/approvals.html", context)


@require_POST
@project_page(Role.REVIEWER, section="approvals")
def approval_decide(request, place: Place, approval_id):
    approval = approval_get(principal=place.principal, approval_id=approval_id)
    form = forms.DecisionForm(request.POST, prefix=str(approval.id))
    if not form.is_valid():
        messages.error(request, "Choose approve or reject (a note is at most 2,000 characters).")
        return redirect(place.url("approvals"))
    try:
        decided = _decide(place, approval.id, form.cleaned_data["decision"], form.cleaned_data["note"])
    except ApplicationError as error:
        if error.status in (403, 404):
            raise
        messages.error(request, error.detail)
    else:
        what = (
            "Approved: the fact is active, and every read sees it now."
            if decided.status == ApprovalStatus.APPROVED
            else "Rejected: no read will ever see the fact."
        )
        messages.success(request, format_html('{} <a href="{}">Open the fact</a>', what, place.url("fact", decided.fact_id)))
    return redirect(_same_site(request, request.POST.get("next")) or place.url("approvals"))


def _same_site(request, url: str | None) -> str | None:
    """`url` when it is a path on this site (the form sends the page it was on), else None:
    a forged `next=https://evil.example` or `//evil.example` must not send a reviewer off-site."""
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return url
    return None


# --- conversations -------------------------------------------------------------------------------


@project_page(section="conversations")
def conversations(request, place: Place):
    queryset = conversations_visible(principal=place.principal).filter(project_id=place.project.id)
    agent, participant = request.GET.get("agent") or "", request.GET.get("participant") or ""
    if agent:
        queryset = queryset.filter(agent_slug=agent)
    if participant:
        queryset = queryset.filter(participant_id=participant)
    queryset = queryset.annotate(message_count=Count("messages"))
    try:
        rows, next_cursor = paginate(queryset, params={"limit": PAGE_SIZE, "cursor": request.GET.get("cursor")})
    except ValidationFailed as error:
        messages.error(request, error.detail)
        rows, next_cursor = [], None
    query = request.GET.copy()
    query.pop("cursor", None)
    context = {"rows": rows, "next_cursor": next_cursor, "agent": agent, "participant": participant, "query": query.urlencode()}
    return page(request, place, "dashboard/conversations.html", context)


@project_page(section="conversations")
def conversation(request, place: Place, conversation_id):
    conversation, rows = messages_list(principal=place.principal, conversation_id=conversation_id)
    return page(request, place, "dashboard/conversation.html", {"conversation": conversation, "messages_": rows})


# --- agents and the playground -------------------------------------------------------------------


@project_page(section="agents")
def agents(request, place: Place):
    rows = agent_services.agents_list(principal=place.principal, project_id=place.project.id).order_by("slug")
    return page(request, place, "dashboard/agents.html", {"agents": rows})


@project_page(section="agents")
def agent(request, place: Place, slug: str):
    """An agent's intents and remember rules, and the playground: exactly what its model would be sent."""
    principal = place.principal
    found = agent_services.agent_get(principal=principal, project_id=place.project.id, slug=slug)
    form = forms.PlaygroundForm(request.POST or None)
    context: dict = {"agent": found, "form": form, "warnings_publishing": agent_services.publishing_warnings(found)}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            # The same three calls as POST /v1/agents/{slug}/context.
            turn = agent_services.Turn.start(
                principal=principal, agent=found, participant_id=data["participant"] or None, conversation_id=data["conversation"],
            )
            result = agent_services.agent_context(turn=turn, user_message=data["message"])
        except ValidationFailed as error:
            _errors_to_form(form, error)
        except ApplicationError as error:  # participant-not-allowed: a viewer names an end user
            form.add_error("participant", error.detail)
        else:
            left_out = context_left_out(turn=turn, context=result, user_message=data["message"])
            context.update(result=result, left_out=left_out, left_out_groups=presenters.left_out_by_reason(left_out))
    return page(request, place, "dashboard/agent.html", context)


@project_page(Role.ADMIN, section="agents")
def agent_edit(request, place: Place, slug: str):
    """An admin edits an agent's declaration (agent.services.agent_save, as PUT /v1/agents/{slug})."""
    found = agent_services.agent_get(principal=place.principal, project_id=place.project.id, slug=slug)
    initial = {"version": found.version, "instructions": found.instructions, "retrieval": presenters.pretty(found.retrieval),
               "remember": presenters.pretty(found.remember) if found.remember else ""}
    form = forms.AgentForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            agent_services.agent_save(principal=place.principal, project_id=place.project.id, replace_only=True, data=agent_services.AgentInput(
                slug=found.slug, version=data["version"], instructions=data["instructions"], retrieval=data["retrieval"],
                remember=data["remember"],
            ))
        except ValidationFailed as error:
            _errors_to_form(form, error)
        else:
            messages.success(request, f"Saved {found.slug}: its next turn reads and remembers as declared.")
            return redirect(place.url("agent", found.slug))
    return page(request, place, "dashboard/agent_edit.html", {"agent": found, "form": form})


# --- working memory ------------------------------------------------------------------------------


@project_page(section="memory")
def memory(request, place: Place):
    return page(request, place, "dashboard/memory.html", {"namespaces": memory_namespaces(principal=place.principal, project_id=place.project.id)})


@project_page(section="memory")
def memory_namespace(request, place: Place, namespace: str):
    """A namespace's `<memory>` block as an agent gets it, and its graph drawn for a person."""
    space = workspace(principal=place.principal, namespace=namespace, project_id=place.project.id)
    form = forms.BlockForm(request.GET or None)
    prompt, budget = "", None
    if form.is_bound and form.is_valid():
        prompt, budget = form.cleaned_data["prompt"] or "", form.cleaned_data["budget"]
    graph = memory_graph(space=space)
    if not graph.order:
        return not_found(request, place, f"The namespace {namespace!r} has no live entries here.")
    block = memory_block_for(space=space, prompt=prompt, budget=budget)
    rows, paths, nodes, width = presenters.graph_rows(graph)
    context = {
        "namespace": namespace, "form": form, "mblock": block, "rows": rows, "paths": paths, "nodes": nodes, "gutter": width,
        "height": presenters.ROW * len(rows), "row_height": presenters.ROW, "dropped": set(block.dropped),
    }
    return page(request, place, "dashboard/memory_namespace.html", context)


# --- settings: keys, members, retention ----------------------------------------------------------


def _member_choices(place: Place) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for membership in members_list(tenant_id=place.tenant.id, project_id=place.project.id):
        seen.setdefault(str(membership.user_id), membership.user.username)
    return sorted(seen.items(), key=lambda item: item[1])


@project_page(Role.ADMIN, section="keys")
def keys(request, place: Place):
    """The project's API keys; a new key is shown once, in the answer to the POST that made it."""
    form = forms.ApiKeyForm(request.POST or None, members=_member_choices(place), initial={"user": str(request.user.pk)})
    created = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        user = get_user_model().objects.get(pk=int(data["user"]))
        if role_for(user_id=user.pk, tenant_id=place.tenant.id, project_id=place.project.id) is None:
            form.add_error("user", f"{user} has no role in {place.ref}.")
        else:
            key, raw = apikey_create(
                user=user, tenant=place.tenant, project=place.project, access=data["access"],
                participant_id=data["participant_id"] or None, name=data["name"],
            )
            created = {"key": key, "raw": raw}
            form = forms.ApiKeyForm(members=_member_choices(place), initial={"user": str(request.user.pk)})
    context = {"keys": apikeys_list(tenant_id=place.tenant.id, project_id=place.project.id), "form": form, "created": created}
    response = page(request, place, "dashboard/keys.html", context)
    if created:
        response["Cache-Control"] = "no-store"  # the key text must not linger in a cache
    return response


@require_POST
@project_page(Role.ADMIN, section="keys")
def key_revoke(request, place: Place, key_id):
    key = apikeys_list(tenant_id=place.tenant.id, project_id=place.project.id).filter(id=key_id).first()
    if key is None:
        return not_found(request, place, "No such key in this project.")
    if key.revoked_at is not None:
        messages.info(request, f"mh_{key.prefix}_… was already revoked.")
    else:
        apikey_revoke(api_key=key)
        messages.success(request, f"Revoked mh_{key.prefix}_…: it is refused from now on.")
    return redirect(place.url("keys"))


@project_page(section="members")
def members(request, place: Place):
    form = forms.MemberForm(request.POST or None)
    if request.method == "POST":
        require(place, Role.ADMIN)
        if form.is_valid():
            try:
                membership = membership_set(principal=place.principal, username=form.cleaned_data["username"], role=form.cleaned_data["role"])
            except ValidationFailed as error:
                _errors_to_form(form, error)
            else:
                messages.success(request, f"{membership.user.username} is now {membership.role} of {place.ref}.")
                return redirect(place.url("members"))
    rows = list(members_list(tenant_id=place.tenant.id, project_id=place.project.id))
    effective = {m.user_id: role_for(user_id=m.user_id, tenant_id=place.tenant.id, project_id=place.project.id) for m in rows}
    context = {"memberships": rows, "effective": effective, "form": form, "roles": Role.choices}
    return page(request, place, "dashboard/members.html", context)


@require_POST
@project_page(Role.ADMIN, section="members")
def member_remove(request, place: Place, membership_id: int):
    try:
        membership_remove(principal=place.principal, membership_id=membership_id)
    except ValidationFailed as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, "Removed the membership.")
    return redirect(place.url("members"))


@project_page(section="retention")
def retention(request, place: Place):
    current = retention_policy_for(project_id=place.project.id)
    form = forms.RetentionForm(request.POST or None, initial=current)
    if request.method == "POST":
        require(place, Role.ADMIN)
        if form.is_valid():
            try:
                retention_policy_set(principal=place.principal, project_id=place.project.id, **form.cleaned_data)
            except ValidationFailed as error:
                _errors_to_form(form, error)
            else:
                messages.success(request, "Saved the retention policy; the next purge applies it.")
                return redirect(place.url("retention"))
    return page(request, place, "dashboard/retention.html", {"form": form, "current": current})
