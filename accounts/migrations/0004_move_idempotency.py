"""IdempotencyRecord moves to core (core 0001): state only, its table stays (see there)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('memoryhub', '0003_retention_policy'),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=[
        migrations.RemoveConstraint(
            model_name='idempotencyrecord',
            name='idempotency_one_per_key_owner',
        ),
        migrations.DeleteModel(
            name='IdempotencyRecord',
        ),
    ])]
