"""`manage.py member add --user U --project T/P --role viewer|writer|reviewer|admin`.

Gives a person (an existing account) a role in one project, or changes it; prints one JSON
line {"id", "user", "project", "role"}. `member remove --user U --project T/P` removes it;
`member list --project T/P` prints who has a role there (the tenant's roles too), one JSON line.
The same memberships as the dashboard's Members page and `/v1/members`, as an operator.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from accounts.models import Role
from accounts.selectors import members_list
from accounts.services import membership_grant, membership_revoke, project_resolve
from core.errors import ApplicationError


class Command(BaseCommand):
    help = "Give, change, remove or list people's roles in a project."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="give a person a role in a project (or change it)")
        add.add_argument("--user", required=True, help="the username")
        add.add_argument("--project", required=True, help="tenant/project (slugs) or a project id")
        add.add_argument("--role", required=True, choices=Role.values)
        remove = sub.add_parser("remove", help="remove a person's role in a project")
        remove.add_argument("--user", required=True)
        remove.add_argument("--project", required=True)
        listing = sub.add_parser("list", help="who has a role in a project")
        listing.add_argument("--project", required=True)

    def handle(self, *args, **options):
        try:
            project = project_resolve(ref=options["project"])
            ref = f"{project.tenant.slug}/{project.slug}"
            if options["action"] == "add":
                membership = membership_grant(username=options["user"], project=project, role=options["role"])
                out = {"id": membership.id, "user": options["user"], "project": ref, "role": membership.role}
            elif options["action"] == "remove":
                if not membership_revoke(username=options["user"], project=project):
                    raise CommandError(f"{options['user']!r} has no role of its own in {ref} (a tenant-wide role is changed in the admin).")
                out = {"user": options["user"], "project": ref, "removed": True}
            else:
                out = {"project": ref, "members": [
                    {"user": m.user.username, "role": m.role, "tenantWide": m.project_id is None}
                    for m in members_list(tenant_id=project.tenant_id, project_id=project.id)
                ]}
        except ApplicationError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(json.dumps(out))
