"""Working memory: a namespace's keyed entries and its task list."""

from __future__ import annotations

import factory

from tests.factories.accounts import _ServiceFactory, owner


class WorkspaceEntryFactory(_ServiceFactory):
    namespace = "ws"
    key = factory.Sequence(lambda n: f"note:{n}")
    value = factory.Sequence(lambda n: f"value {n}")

    @classmethod
    def _write(cls, world, *, namespace, **fields):
        from workspaces import services as workspaces

        return workspaces.memory_save(space=workspaces.workspace(principal=owner(world), namespace=namespace), **fields)


class WorkspaceTasksFactory(_ServiceFactory):
    """A namespace's whole task list (PUT replaces it): `count` tasks, the first done."""

    namespace = "ws"
    count = 3

    @classmethod
    def _write(cls, world, *, namespace, count):
        from workspaces import services as workspaces

        tasks = [{"id": f"t{i}", "desc": f"task {i}", "status": "done" if i == 0 else "todo"} for i in range(count)]
        return workspaces.tasks_put(space=workspaces.workspace(principal=owner(world), namespace=namespace), tasks=tasks)
