"""`manage.py participant export|erase ID --project T/P` (or `--tenant T` for every project).

An operator's door onto the same services as `GET /v1/participants/{id}/export` and
`DELETE /v1/participants/{id}`: `export` prints the JSON document (or writes it to
`--output`), `erase` erases everything kept for the participant now and prints the
counts as one JSON line. Runs as an admin of that tenant or project.
"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.models import Access, Role, Tenant
from accounts.services import Principal, project_resolve
from core import scoping
from core.api import iso_time
from core.errors import ApplicationError
from privacy.erasure import participant_data, participant_erase


class Command(BaseCommand):
    help = "Export or erase everything kept for one participant."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["export", "erase"])
        parser.add_argument("participant_id")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--project", help="tenant/project (slugs) or a project id")
        where.add_argument("--tenant", help="a tenant's slug: every project of it")
        parser.add_argument("--output", help="export: write the document to this file instead of stdout")

    def handle(self, *args, **options):
        from privacy.views import export_to_dict

        if options["project"]:
            try:
                project = project_resolve(ref=options["project"])
            except ApplicationError as exc:
                raise CommandError(exc.detail) from None
            tenant_id, project_id = project.tenant_id, project.id
        else:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant {options['tenant']!r}.")
            tenant_id, project_id = tenant.id, None
        operator = Principal(
            api_key_id=None, tenant_id=tenant_id, project_id=project_id, user_id=None, access=Access.WRITE,
            role=Role.ADMIN, participant_id=None,
        )
        try:
            with scoping.scope(tenant_id=tenant_id, project_id=project_id):
                if options["action"] == "erase":
                    result = participant_erase(principal=operator, participant_id=options["participant_id"])
                    self.stdout.write(json.dumps({"erasedAt": iso_time(result.erased_at), "erased": result.counts}))
                    return
                document = json.dumps(export_to_dict(participant_data(principal=operator, participant_id=options["participant_id"])))
        except ApplicationError as exc:
            raise CommandError(exc.detail) from None
        if options["output"]:
            Path(options["output"]).write_text(document)
        else:
            self.stdout.write(document)
