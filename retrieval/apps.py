"""Retrieval: keyword, semantic and hybrid search over facts and conversations."""

from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created


def _tune_vector_search(sender, connection, **kwargs):
    """Per-connection pgvector settings for scoped HNSW reads.

    Iterative scan (pgvector >= 0.8) keeps walking the graph until `limit` rows pass the
    scope conditions, so a narrow scope still gets its rows; relaxed order is re-sorted
    by the exact distance in the query itself. The scan may use a few times work_mem
    (scan_mem_multiplier): with the default 1x, a scope of 30 rows in 50,000 ran out
    of memory before finding 10.
    """
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), "
            "set_config('hnsw.ef_search', %s, false), set_config('hnsw.max_scan_tuples', %s, false), "
            "set_config('hnsw.scan_mem_multiplier', %s, false)",
            [
                str(settings.MEMORYHUB_HNSW_EF_SEARCH), str(settings.MEMORYHUB_HNSW_MAX_SCAN_TUPLES),
                str(settings.MEMORYHUB_HNSW_SCAN_MEM_MULTIPLIER),
            ],
        )


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self) -> None:
        connection_created.connect(_tune_vector_search, dispatch_uid="memoryhub-hnsw-settings")
