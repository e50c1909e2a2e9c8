"""The scheduled jobs as plain service functions: expiry, retention purge, embedding backfill.

Celery tasks (memoryhub.tasks), management commands and the in-process beat
(memoryhub.beat) are thin doors onto these. Every job is idempotent and safe to run
twice or concurrently: one run of each holds a PostgreSQL advisory lock (a second run
at the same time returns `{"skipped": "running"}`), rows are taken with
`FOR UPDATE SKIP LOCKED` so a job never waits on a row a request is changing, work goes
in short batches (one transaction each), and each run logs and returns its counts.
"""

from memoryhub.jobs.backfill import embeddings_backfill
from memoryhub.jobs.expiry import facts_expire
from memoryhub.jobs.retention import retention_policy_for, retention_policy_set, retention_purge

__all__ = ["embeddings_backfill", "facts_expire", "retention_policy_for", "retention_policy_set", "retention_purge"]
