"""The one door every project page of the dashboard goes through.

A page's URL names its project (`/dashboard/<tenant>/<project>/…`), and `project_page`
decides, before the view runs:

- signed out: a redirect to the sign-in page, back here afterwards;
- no such project, or one the person has no role in: 404, never 403 (as in the API,
  existence is not revealed), whatever page of it was asked for;
- a role below the page's: 403, saying which role the page needs;
- a URL or query the services refuse (an odd namespace, an impossible time): 400, saying why;
- otherwise the view runs, and its template renders, inside `scoping.scope(tenant,
  project)`, with `place.principal`: the person as a write key of theirs would be
  (`accounts.services.person_principal`). Views pass that principal to the same services
  and selectors the API calls, which check the role again, so a POST that skips a hidden
  button still meets the same refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse
from django.shortcuts import render
from django.template.response import SimpleTemplateResponse
from django.urls import reverse

from accounts.models import ROLE_RANK, Project, Role
from accounts.selectors import projects_for_user
from accounts.services import Principal, person_principal
from approvals.selectors import approvals_list
from core import scoping
from core.api import unstorable_in_url
from core.errors import PROBLEM_CONTENT_TYPE, Forbidden, NotFound, ParticipantNotAllowed, ValidationFailed, problem_body

LAST_PROJECT = "dashboard:last-project"  # session key: where `/dashboard/` takes a person back to


@dataclass(frozen=True)
class Place:
    """Where a page is (a project) and who looks at it (their principal and role there)."""

    project: Project
    principal: Principal

    @property
    def tenant(self):
        return self.project.tenant

    @property
    def role(self) -> str:
        return self.principal.role

    @property
    def ref(self) -> str:
        return f"{self.project.tenant.slug}/{self.project.slug}"

    def can(self, role: str) -> bool:
        return self.principal.rank >= ROLE_RANK[Role(role)]

    # For templates, which cannot pass arguments.
    @property
    def is_writer(self) -> bool:
        return self.can(Role.WRITER)

    @property
    def is_reviewer(self) -> bool:
        return self.can(Role.REVIEWER)

    @property
    def is_admin(self) -> bool:
        return self.can(Role.ADMIN)

    def url(self, name: str, *args) -> str:
        return reverse(f"dashboard:{name}", args=[self.project.tenant.slug, self.project.slug, *args])


def page(request, place: Place | None, template: str, context: dict | None = None, *, status: int = 200, section: str = ""):
    """Render a dashboard page with what the frame needs: the switcher's projects, the pending count."""
    frame = {"place": place, "section": section or getattr(request, "dashboard_section", "")}
    if request.user.is_authenticated:
        frame["projects"] = projects_for_user(user_id=request.user.pk)
    if place is not None:
        frame["t"], frame["p"] = place.tenant.slug, place.project.slug  # for {% url %} in templates
    if place is not None and place.is_reviewer:
        frame["pending_count"] = approvals_list(principal=place.principal).count()
    return render(request, template, frame | (context or {}), status=status)


def not_found(request, place: Place | None = None, detail: str = "There is no such page here, or you have no role where it is."):
    return page(request, place, "dashboard/error.html", {"title": "Not found", "detail": detail}, status=404)


def bad_request(request, place: Place, detail: str):
    """A 400: the error page for a browser (it asks for HTML), a problem+json body for any
    other client, as the API answers."""
    if "text/html" not in request.headers.get("Accept", ""):
        body = problem_body(400, ValidationFailed.code, ValidationFailed.title, detail)
        return JsonResponse(body, status=400, content_type=PROBLEM_CONTENT_TYPE)
    return page(request, place, "dashboard/error.html", {"title": "Bad request", "detail": detail}, status=400)


def forbidden(request, place: Place, detail: str):
    return page(request, place, "dashboard/error.html", {"title": "Not allowed", "detail": detail}, status=403)


def project_page(role: str = Role.VIEWER, *, section: str = ""):
    """Decorate a view `view(request, place, ...)` of a project page that needs at least `role`."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, tenant: str, project: str, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            row = Project.objects.select_related("tenant").filter(tenant__slug=tenant, slug=project).first()
            principal = person_principal(user=request.user, tenant_id=row.tenant_id, project_id=row.id) if row else None
            if principal is None:
                return not_found(request)
            place = Place(project=row, principal=principal)
            request.dashboard_section = section
            # Lazy querysets and template responses are evaluated here, inside the scope.
            with scoping.scope(tenant_id=row.tenant_id, project_id=row.id):
                if not place.can(role):
                    return forbidden(request, place, f"This page needs the {role} role; yours in {place.ref} is {place.role}.")
                # What PostgreSQL cannot store (NUL) would fail in the first query naming it (500).
                if found := unstorable_in_url(request):
                    return bad_request(request, place, f"{found[0]} holds a character no text may hold ({ord(found[1]):#06x}).")
                request.session[LAST_PROJECT] = place.ref
                try:
                    response = view(request, place, *args, **kwargs)
                except (Forbidden, ParticipantNotAllowed) as error:
                    response = forbidden(request, place, error.detail)
                except NotFound as error:
                    response = not_found(request, place, error.detail)
                except ValidationFailed as error:  # what the URL or its query names cannot be (a namespace, a time)
                    response = bad_request(request, place, error.detail)
                if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
                    response.render()
            return response

        return wrapper

    return decorate


def require(place: Place, role: str) -> None:
    """Refuse (403) an action the person's role does not allow; the service would refuse it too."""
    if not place.can(role):
        raise Forbidden(f"This needs the {role} role; yours in {place.ref} is {place.role}.")
