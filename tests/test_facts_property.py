"""As-of reads agree with an in-memory model over random sequences of write/supersede/verify/delete.

A hypothesis state machine drives facts.services (inside the key's tenant scope) and keeps
a model of every fact: its revisions (content, version, trust, status), whether it is
deleted, and which fact holds each key slot. After every step it takes a time `t` such that
every write of that step happened at or before `t` and every write of the next step happens
after it, and records what the model says is visible at `t`. Then:

- after each step, the current state of every fact (read back from the database) is the
  model's, with status `deleted` once deleted;
- at the end of each example, for every fact, selectors.fact_as_of returns the revision the
  model says was current at the recorded times around each change (the time before the
  fact existed, the last time before and the first time after every change of it), and
  NotFound before creation and after deletion;
- the exact edges hold: as of a revision's recorded_at it is current, a microsecond earlier
  the previous one was (NotFound before v1), and as of the delete time nothing is;
- the revision history (selectors.fact_revisions) is the model's, chains without gaps, and
  has one current revision (none once deleted);
- through the API, GET ?revision=N agrees with the model for every version (404 past the
  last), and GET ?asOf=t at the first recorded time of each visible state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test
from rest_framework.test import APIClient

from accounts.auth import ApiUser
from accounts.services import apikey_authenticate
from core import scoping
from core.errors import NotFound, VersionConflict
from facts import selectors, services
from facts.services import FactInput, FactNotActive

pytestmark = pytest.mark.django_db

KEYS = ["k0", "k1"]
MICROSECOND = timedelta(microseconds=1)

json_scalars = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.booleans(),
)
contents = st.one_of(
    json_scalars,
    st.lists(json_scalars, max_size=3),
    st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=3), json_scalars, max_size=3),
)
fact_index = st.integers(min_value=0, max_value=7)


@dataclass
class ModelFact:
    id: str
    key: str | None
    states: list[dict] = field(default_factory=list)  # states[v - 1]: {content, version, trust, status}
    deleted: bool = False

    @property
    def current(self) -> dict:
        return self.states[-1]


def _state(obj) -> dict:
    """What the model compares: content, version, trust, status (of a Fact or a FactRevision)."""
    return {"content": obj.content, "version": obj.version, "trust": obj.trust, "status": obj.status}


class FactsMachine(RuleBasedStateMachine):
    principal = None  # set by the test
    client = None

    @initialize()
    def start(self):
        # Facts of earlier examples stay in the (rolled back only at the end) transaction:
        # a namespace of its own keeps this example's key slots free.
        self.namespace = "prop-" + uuid.uuid4().hex[:12]
        self.facts: list[ModelFact] = []
        self.slots: dict[str, ModelFact] = {}
        self.timeline: list[tuple[datetime, dict[str, dict | None]]] = []
        self._tick(None)

    # --- time -------------------------------------------------------------------------

    def _tick(self, written_at: datetime | None) -> None:
        """Record the model's visible state at a time after this step's writes and before the next's."""
        t = timezone.now()
        if written_at is not None and written_at > t:
            t = written_at  # a strictly-later tweak may put a write a microsecond ahead of the clock
        while timezone.now() <= t:  # so the next step's writes are strictly after t
            pass
        visible = {f.id: (None if f.deleted else dict(f.current)) for f in self.facts}
        self.timeline.append((t, visible))

    def _pick(self, index: int) -> ModelFact:
        return self.facts[index % len(self.facts)]

    # --- rules ------------------------------------------------------------------------

    @rule(key=st.one_of(st.none(), st.sampled_from(KEYS)), content=contents)
    def write(self, key, content):
        fact, outcome = services.fact_write(
            principal=self.principal,
            data=FactInput(type="prop.note", key=key, namespace=self.namespace, content=content),
        )
        holder = self.slots.get(key) if key is not None else None
        if holder is not None:
            assert outcome == "superseded" and str(fact.id) == holder.id
            holder.states.append({"content": content, "version": holder.current["version"] + 1, "trust": "asserted", "status": "active"})
            model = holder
        else:
            assert outcome == "created" and fact.version == 1
            assert str(fact.id) not in {f.id for f in self.facts}
            model = ModelFact(id=str(fact.id), key=key, states=[{"content": content, "version": 1, "trust": "asserted", "status": "active"}])
            self.facts.append(model)
            if key is not None:
                self.slots[key] = model
        assert _state(fact) == model.current
        self._tick(fact.updated_at)

    @precondition(lambda self: self.facts)
    @rule(index=fact_index, content=contents, stale=st.sampled_from([None, -1, 1]))
    def supersede(self, index, content, stale):
        model = self._pick(index)
        expect = model.current["version"] + (stale or 0)
        try:
            fact = services.fact_supersede(principal=self.principal, fact_id=model.id, content=content, expect_version=expect)
        except FactNotActive:
            assert model.deleted
        except VersionConflict as conflict:
            assert not model.deleted and stale is not None
            assert conflict.extra == {"currentVersion": model.current["version"]}
        else:
            assert not model.deleted and stale is None
            model.states.append(dict(model.current, content=content, version=model.current["version"] + 1))
            assert _state(fact) == model.current
            self._tick(fact.updated_at)
            return
        self._tick(None)

    @precondition(lambda self: self.facts)
    @rule(index=fact_index)
    def verify(self, index):
        model = self._pick(index)
        try:
            fact = services.fact_verify(principal=self.principal, fact_id=model.id)
        except FactNotActive:
            assert model.deleted
            self._tick(None)
            return
        assert not model.deleted
        if model.current["trust"] != "verified":  # verifying a verified fact (no expiry) changes nothing
            model.states.append(dict(model.current, trust="verified", version=model.current["version"] + 1))
        assert _state(fact) == model.current
        assert fact.verified_by == str(self.principal.user_id)
        self._tick(fact.updated_at)

    @precondition(lambda self: self.facts)
    @rule(index=fact_index)
    def delete(self, index):
        model = self._pick(index)
        fact = services.fact_delete(principal=self.principal, fact_id=model.id)
        assert fact.status == "deleted"
        model.deleted = True
        if model.key is not None and self.slots.get(model.key) is model:
            del self.slots[model.key]  # the slot is free: writing the key again makes a new fact
        self._tick(fact.updated_at)

    # --- checks -----------------------------------------------------------------------

    @invariant()
    def current_state_agrees(self):
        if not getattr(self, "facts", None):
            return
        found = {str(f.id): f for f in selectors.facts_visible(principal=self.principal).filter(id__in=[m.id for m in self.facts])}
        for model in self.facts:
            expected = dict(model.current, status="deleted") if model.deleted else model.current
            assert _state(found[model.id]) == expected, model.id

    def _boundaries(self, model: ModelFact) -> list[tuple[datetime, dict | None]]:
        """The recorded times around each change of what the model shows for the fact:
        the first time, and the last time before and the first time after every change."""
        points = []
        previous = object()
        for index, (t, visible) in enumerate(self.timeline):
            expected = visible.get(model.id)
            if index == 0 or expected != previous:
                if index > 0 and points[-1][0] != self.timeline[index - 1][0]:
                    points.append((self.timeline[index - 1][0], previous))
                points.append((t, expected))
            previous = expected
        if points[-1][0] != self.timeline[-1][0]:
            points.append((self.timeline[-1][0], previous))
        return points

    def teardown(self):
        if not getattr(self, "facts", None):
            return
        for model in self.facts:
            # As-of, at every recorded time around a change of this fact (steps that did not
            # touch it in between change nothing the selector looks at).
            boundaries = self._boundaries(model)
            for t, expected in boundaries:
                try:
                    _, revision = selectors.fact_as_of(principal=self.principal, fact_id=model.id, at=t)
                except NotFound:
                    assert expected is None, (model.id, t, "NotFound", expected)
                else:
                    assert expected is not None, (model.id, t, _state(revision), "expected NotFound")
                    assert _state(revision) == expected, (model.id, t)

            # History: the model's revisions, chained, one current (none once deleted).
            fact, revisions = selectors.fact_revisions(principal=self.principal, fact_id=model.id)
            assert [_state(r) for r in revisions] == model.states
            for earlier, later in zip(revisions, revisions[1:]):
                assert earlier.recorded_at < earlier.superseded_at == later.recorded_at
                assert earlier.invalidation_reason == "superseded"
            last = revisions[-1]
            if model.deleted:
                assert last.superseded_at is not None and last.invalidation_reason == "deleted"
                assert last.recorded_at < last.superseded_at == fact.updated_at
            else:
                assert last.superseded_at is None and last.invalidation_reason is None
                assert last.recorded_at == fact.updated_at
            assert revisions[0].recorded_at == fact.created_at
            # The exact edges: a revision is current from its recorded_at (inclusive) until
            # its superseded_at (exclusive); a microsecond earlier the previous one was.
            edges = [(r.recorded_at, r.version) for r in revisions]
            if model.deleted:
                edges.append((last.superseded_at, None))
            for at, version in edges:
                for moment, want in [(at, version), (at - MICROSECOND, (version or len(model.states) + 1) - 1)]:
                    expected = model.states[want - 1] if want else None
                    try:
                        _, revision = selectors.fact_as_of(principal=self.principal, fact_id=model.id, at=moment)
                    except NotFound:
                        assert expected is None, (model.id, moment, "NotFound", expected)
                    else:
                        assert expected is not None and _state(revision) == expected, (model.id, moment, _state(revision))

            # The API agrees: every ?revision=N ...
            url = f"/v1/facts/{model.id}"
            for state in model.states:
                body = self.client.get(url, {"revision": state["version"]}).json()
                assert {k: body[k] for k in ("content", "version", "trust", "status")} == state
            missing = self.client.get(url, {"revision": len(model.states) + 1})
            assert missing.status_code == 404
            # ... and ?asOf=t at the first recorded time after each change (and before creation).
            changes = [p for i, p in enumerate(boundaries) if i == 0 or p[1] != boundaries[i - 1][1]]
            for t, expected in changes:
                response = self.client.get(url, {"asOf": t.isoformat()})
                if expected is None:
                    assert response.status_code == 404, (t, response.json())
                else:
                    assert response.status_code == 200, response.content
                    body = response.json()
                    assert {k: body[k] for k in ("content", "version", "trust", "status")} == expected, t


def test_as_of_reads_agree_with_the_model(world):
    raw = world.key()  # alice, admin of acme: may write, verify and delete
    principal = apikey_authenticate(raw=raw)
    FactsMachine.principal = principal
    # The API checks go through the views, not the key lookup (what the other tests cover).
    client = APIClient()
    client.force_authenticate(user=ApiUser(principal), token=principal)
    FactsMachine.client = client
    try:
        with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
            run_state_machine_as_test(
                FactsMachine,
                settings=settings(
                    max_examples=20, stateful_step_count=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                ),
            )
    finally:
        FactsMachine.principal = FactsMachine.client = None
