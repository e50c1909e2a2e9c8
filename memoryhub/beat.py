"""The beat schedule without a broker: the same entries, run on a background thread.

With no REDIS_URL (the embedded default of `make run`) there is no `celery beat` and no
worker, so `manage.py serve` starts an `InProcessBeat`: it reads the schedule from the
Celery app (memoryhub/celery.py, the one place it is written), asks each entry's
schedule when it is due as beat would, and runs the task in-process (`task.apply`), one
at a time. The jobs are the same functions, with the same locks, as in production.
"""

from __future__ import annotations

import logging
import threading

from celery.schedules import maybe_schedule
from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)

MAX_SLEEP = 60.0  # look at the schedule at least this often


class InProcessBeat:
    """Runs a beat schedule's tasks in this process on one daemon thread."""

    def __init__(self, schedule: dict | None = None, app=None):
        if app is None:
            from memoryhub.celery import app
        self.app = app
        self.schedule = dict(app.conf.beat_schedule if schedule is None else schedule)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memoryhub-beat", daemon=True)
        self.runs: dict[str, int] = {name: 0 for name in self.schedule}

    def start(self) -> InProcessBeat:
        self._thread.start()
        logger.info("in-process beat: %s", ", ".join(sorted(self.schedule)) or "nothing scheduled")
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the job that is running, if any (waits up to `timeout`)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            self._tick_until_stopped()
        finally:
            connections.close_all()  # this thread's own connections

    def _tick_until_stopped(self) -> None:
        self.app.loader.import_default_modules()  # every app's tasks module, as a worker does
        entries = {
            name: (entry["task"], maybe_schedule(entry["schedule"], app=self.app), entry.get("args", ()), entry.get("kwargs", {}))
            for name, entry in self.schedule.items()
        }
        # As celery beat does with a fresh schedule: the first run is one interval from now.
        last_run = {name: self.app.now() for name in entries}
        while not self._stop.is_set():
            sleep = MAX_SLEEP
            for name, (task_name, schedule, args, kwargs) in entries.items():
                if self._stop.is_set():
                    return
                due, next_in = schedule.is_due(last_run[name])
                if due:
                    last_run[name] = self.app.now()
                    self._run(name, task_name, args, kwargs)
                    due, next_in = schedule.is_due(last_run[name])
                sleep = min(sleep, max(0.0, next_in))
            self._stop.wait(sleep)

    def _run(self, name: str, task_name: str, args, kwargs) -> None:
        try:
            result = self.app.tasks[task_name].apply(args=args, kwargs=kwargs, throw=True)
            logger.info("in-process beat: %s -> %s", name, result.result)
        except Exception:
            logger.exception("in-process beat: %s failed; it runs again at its next time", name)
        finally:
            self.runs[name] += 1
            close_old_connections()
