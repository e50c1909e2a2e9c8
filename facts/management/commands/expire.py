"""`manage.py expire`: mark facts past expiresAt as expired now (the beat runs it every 5 minutes).

Prints one JSON line of counts, e.g. {"facts": 12, "batches": 1}, or {"skipped": "running"}
when another run holds the job's lock.
"""

import json

from django.core.management.base import BaseCommand

from facts.expiry import facts_expire


class Command(BaseCommand):
    help = "Mark facts past expiresAt as expired (facts.expiry.facts_expire)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=None, help="facts per transaction (MEMORYHUB_JOB_BATCH)")

    def handle(self, *args, **options):
        self.stdout.write(json.dumps(facts_expire(batch_size=options["batch"], budget_seconds=None)))
