"""`manage.py purge`: delete what is past its project's retention now (the beat runs it hourly).

Prints one JSON line of counts, or {"skipped": "running"} when another run holds the lock.
"""

import json

from django.core.management.base import BaseCommand

from memoryhub.jobs import retention_purge


class Command(BaseCommand):
    help = "Delete what is past its project's retention (memoryhub.jobs.retention_purge)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=None, help="rows per transaction (MEMORYHUB_JOB_BATCH)")

    def handle(self, *args, **options):
        self.stdout.write(json.dumps(retention_purge(batch_size=options["batch"], budget_seconds=None)))
