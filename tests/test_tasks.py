"""In-process task runner (no broker): merges queued calls, never runs inside the write."""

from __future__ import annotations

import threading
import time

import pytest

from core import tasks


class RecordingTask:
    name = "test.record"

    def __init__(self):
        self.calls: list[list] = []
        self.started = threading.Event()
        self.gate = threading.Event()

    def apply(self, args, throw=True):
        self.started.set()
        self.gate.wait(5)
        self.calls.append(list(args[0]))


def _wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_queued_calls_of_one_task_are_merged_into_batches(settings):
    settings.MEMORYHUB_EMBEDDINGS_BATCH = 4
    task = RecordingTask()
    runner = tasks._InProcessRunner()
    try:
        runner.submit(task, [0])
        assert task.started.wait(5)  # the runner is busy with [0] ...
        for i in range(1, 7):
            runner.submit(task, [i])  # ... while six more calls wait in line
        task.gate.set()
        assert _wait_for(lambda: sum(len(c) for c in task.calls) == 7)
    finally:
        runner.stop()
    assert task.calls == [[0], [1, 2, 3, 4], [5, 6]]


@pytest.mark.django_db(transaction=True)
def test_work_enqueued_in_a_transaction_waits_for_the_commit(settings):
    from django.db import transaction

    settings.MEMORYHUB_TASKS_INLINE = False
    settings.CELERY_TASK_ALWAYS_EAGER = True
    task = RecordingTask()
    task.gate.set()
    try:
        with transaction.atomic():
            tasks.enqueue_on_commit(task, ["a"])
            time.sleep(0.1)
            assert task.calls == []  # nothing runs before the commit
        assert _wait_for(lambda: task.calls == [["a"]])
    finally:
        tasks.shutdown()


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_write_enqueues_nothing(settings):
    from django.db import transaction

    settings.MEMORYHUB_TASKS_INLINE = False
    settings.CELERY_TASK_ALWAYS_EAGER = True
    task = RecordingTask()
    task.gate.set()
    try:
        with transaction.atomic():
            tasks.enqueue_on_commit(task, ["b"])
            transaction.set_rollback(True)
        time.sleep(0.2)
        assert task.calls == []
    finally:
        tasks.shutdown()
