"""`manage.py bootstrap --tenant T --project P --user U [--password PW]`.

Creates what is missing (U as tenant admin) and prints one JSON line
{"tenantId", "projectId", "userId", "apiKey"} with a new write key for U on P.
"""

import json

from django.core.management.base import BaseCommand

from accounts.services import tenant_bootstrap


class Command(BaseCommand):
    help = "Create a tenant, project and admin user if missing, and print a new write API key."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--project", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--password")

    def handle(self, *args, **options):
        result = tenant_bootstrap(
            tenant=options["tenant"], project=options["project"], username=options["user"], password=options["password"]
        )
        self.stdout.write(json.dumps(result))
