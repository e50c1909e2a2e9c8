# Fact revisions are append-only, enforced by the database itself (issue 12, integrity):
# whatever code runs as the application role, a revision's recorded state never changes
# and no revision disappears, except
# - closing the open revision once (superseded_at, invalidation_reason, invalidated_by),
#   which is how a fact gets its next revision or ends;
# - deletes in a transaction that has said it purges (facts.services.allow_revision_deletes):
#   the retention purge and erasure by person. TRUNCATE (test flushes) fires no row trigger.

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION facts_revision_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('memoryhub.revision_deletes', true) = 'allowed' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'fact revisions are append-only: revision % of fact % may only be removed by the retention purge or erasure', OLD.version, OLD.fact_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.superseded_at IS NOT NULL THEN
        RAISE EXCEPTION 'fact revisions are append-only: revision % of fact % is closed and never changes', OLD.version, OLD.fact_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (to_jsonb(NEW) - 'superseded_at' - 'invalidation_reason' - 'invalidated_by')
       IS DISTINCT FROM (to_jsonb(OLD) - 'superseded_at' - 'invalidation_reason' - 'invalidated_by') THEN
        RAISE EXCEPTION 'fact revisions are append-only: only closing revision % of fact % is allowed', OLD.version, OLD.fact_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER facts_revision_append_only
    BEFORE UPDATE OR DELETE ON facts_factrevision
    FOR EACH ROW EXECUTE FUNCTION facts_revision_append_only();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS facts_revision_append_only ON facts_factrevision;
DROP FUNCTION IF EXISTS facts_revision_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("facts", "0008_job_indexes")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
