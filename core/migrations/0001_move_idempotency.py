"""IdempotencyRecord moves from the accounts app (label memoryhub) to core, keeping its table.

State only: the table memoryhub_idempotencyrecord, its rows, indexes and constraint stay as
they are; the model now belongs to core (db_table names the table it always had).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('memoryhub', '0004_move_idempotency'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.CreateModel(
            name='IdempotencyRecord',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('key', models.CharField(max_length=255)),
                ('request_hash', models.CharField(max_length=64)),
                ('state', models.CharField(choices=[('in-flight', 'In Flight'), ('done', 'Done')], default='in-flight', max_length=16)),
                ('response_status', models.PositiveSmallIntegerField(null=True)),
                ('response_body', models.BinaryField(null=True)),
                ('response_content_type', models.CharField(blank=True, max_length=100)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('api_key', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memoryhub.apikey')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memoryhub.tenant')),
            ],
            options={
                'db_table': 'memoryhub_idempotencyrecord',
                'constraints': [models.UniqueConstraint(fields=('api_key', 'key'), name='idempotency_one_per_key_owner')],
            },
        )]),
    ]
