"""retrieval: intents, keyword/semantic/hybrid search, recall over conversations, embeddings and their backfill."""

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
    label = "search"  # `retrieval` is the agent app's label (its tables were made under it)
    verbose_name = "Retrieval"

    def ready(self) -> None:
        connection_created.connect(_tune_vector_search, dispatch_uid="memoryhub-hnsw-settings")
        _plug_fact_embeddings()
        from core.tasks import on_shutdown_interrupt
        from retrieval.embeddings import interrupt_documents

        on_shutdown_interrupt(interrupt_documents)


def _plug_fact_embeddings() -> None:
    """Fact writes embed their texts through retrieval (facts.hooks): inline within the budget
    (retrieval.inline), the rest after commit (retrieval.tasks.embed_facts)."""
    from core.tasks import enqueue_on_commit
    from facts import hooks
    from retrieval.inline import embed_within_budget
    from retrieval.tasks import embed_facts

    hooks.plug(embed_now=embed_within_budget, embed_later=lambda ids: enqueue_on_commit(embed_facts, ids))
