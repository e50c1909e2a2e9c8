"""`manage.py apikey create --user U --project T/P --access read|write [--participant ID]`.

Prints one JSON line {"apiKey", "id"}. `apikey revoke ID` revokes a key.
"""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiKey
from accounts.services import apikey_create, apikey_revoke, project_resolve
from core.errors import ApplicationError


class Command(BaseCommand):
    help = "Create or revoke API keys."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a key and print it once")
        create.add_argument("--user", required=True)
        create.add_argument("--project", required=True, help="tenant/project (slugs) or a project id")
        create.add_argument("--access", required=True, choices=["read", "write"])
        create.add_argument("--participant", "--participant-id", dest="participant", help="bind the key to one participant")
        create.add_argument("--name", default="")
        revoke = sub.add_parser("revoke", help="revoke a key by id")
        revoke.add_argument("id")

    def handle(self, *args, **options):
        try:
            if options["action"] == "create":
                return self._create(options)
            return self._revoke(options)
        except ApplicationError as exc:
            raise CommandError(exc.detail) from None

    def _create(self, options):
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"No user {options['user']!r}.")
        project = project_resolve(ref=options["project"])
        key, raw = apikey_create(
            user=user, tenant=project.tenant, project=project, access=options["access"],
            participant_id=options.get("participant"), name=options["name"],
        )
        self.stdout.write(json.dumps({"apiKey": raw, "id": str(key.id)}))

    def _revoke(self, options):
        key = ApiKey.objects.filter(id=options["id"]).first()
        if key is None:
            raise CommandError(f"No API key {options['id']!r}.")
        apikey_revoke(api_key=key)
        self.stdout.write(json.dumps({"id": str(key.id), "revoked": True}))
