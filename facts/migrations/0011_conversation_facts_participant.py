# A fact kept in a conversation is kept for the conversation's participant (issue 17, item 4):
# facts written before that rule, with a conversation but no participant, take the
# conversation's, so they are read, exported and erased with what that person said. A fact
# whose slot is already held for that participant keeps none (it stays the project's) rather
# than break the one-live-fact-per-slot constraint. Revisions are append-only and keep
# their recorded scope; reads and erasure reach them through their fact.

from django.db import migrations

FORWARD = """
UPDATE facts_fact f SET participant_id = c.participant_id,
       subjects = CASE WHEN f.subjects = '[]'::jsonb
                       THEN jsonb_build_array(jsonb_build_object('kind', 'participant', 'id', c.participant_id))
                       ELSE f.subjects END
FROM retrieval_conversation c
WHERE f.conversation_id = c.id AND f.participant_id IS NULL AND c.participant_id IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM facts_fact o
      WHERE f.key IS NOT NULL AND o.key = f.key AND o.id <> f.id AND o.status IN ('active', 'pending')
        AND o.tenant_id = f.tenant_id AND o.project_id IS NOT DISTINCT FROM f.project_id
        AND o.participant_id = c.participant_id AND o.conversation_id = f.conversation_id
        AND o.namespace IS NOT DISTINCT FROM f.namespace AND o.type = f.type
  )
"""


class Migration(migrations.Migration):
    dependencies = [
        ("facts", "0010_workspace_participant"),
        ("retrieval", "0003_job_indexes"),
    ]

    operations = [migrations.RunSQL(FORWARD, migrations.RunSQL.noop)]
