"""`manage.py backfill`: embed facts and messages lacking an embedding of the configured model.

The beat runs a time-boxed backfill every 2 minutes; by hand it runs until nothing is
left (or for `--seconds`), e.g. to re-embed at once after changing the model. Prints one
JSON line of counts ({"model", "facts", "messages", "failed", "batches", "done"}); on a
terminal (not in CI) a progress line on stderr counts up meanwhile.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from core.progress import Progress
from retrieval.backfill import embeddings_backfill
from retrieval.embeddings import EmbeddingError


class Command(BaseCommand):
    help = "Embed what lacks an embedding of the configured model (retrieval.backfill.embeddings_backfill)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=None, help="rows per provider request (MEMORYHUB_EMBEDDINGS_BATCH)")
        parser.add_argument("--seconds", type=float, default=None, help="stop starting batches after this long (default: until done)")

    def handle(self, *args, **options):
        try:
            with Progress("backfill", stream=self.stderr._out) as progress:
                counts = embeddings_backfill(
                    batch_size=options["batch"], budget_seconds=options["seconds"],
                    on_batch=lambda c: progress.update(c["facts"] + c["messages"], note=f"embedded ({c['batches']} batches, {c['failed']} failed)"),
                )
        except EmbeddingError as exc:
            raise CommandError(f"The embeddings provider failed: {exc}. Batches done so far are kept; run it again.") from None
        self.stdout.write(json.dumps(counts))
