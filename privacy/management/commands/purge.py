"""`manage.py purge`: delete what is past its project's retention now (the beat runs it hourly).

Prints one JSON line of counts, or {"skipped": "running"} when another run holds the lock;
on a terminal (not in CI) a progress line on stderr counts up meanwhile.
"""

import json

from django.core.management.base import BaseCommand

from core.progress import Progress
from privacy.retention import retention_purge


class Command(BaseCommand):
    help = "Delete what is past its project's retention (privacy.retention.retention_purge)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=None, help="rows per transaction (MEMORYHUB_JOB_BATCH)")

    def handle(self, *args, **options):
        with Progress("purge", stream=self.stderr._out) as progress:
            counts = retention_purge(
                batch_size=options["batch"], budget_seconds=None,
                on_batch=lambda c: progress.update(c["deletedFacts"] + c["expiredFacts"] + c["conversations"],
                                                   note=f"facts and conversations purged ({c['batches']} batches)"),
            )
        self.stdout.write(json.dumps(counts))
