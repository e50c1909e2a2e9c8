# A second HNSW graph for the facts kept for a whole project (see facts.models.Fact.Meta).
# Built CONCURRENTLY: on a deployed table the build takes minutes and must not block writes.

import pgvector.django.indexes
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("facts", "0006_workspaces"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="fact",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(("conversation_id__isnull", True), ("participant_id__isnull", True)),
                ef_construction=64, fields=["embedding"], m=16, name="fact_project_embedding_hnsw",
                opclasses=["vector_cosine_ops"],
            ),
        ),
    ]
