"""The dashboard's forms: they read what a person typed; the services decide what it means."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms

from accounts.models import Access, Role
from approvals.models import ApprovalStatus
from facts.models import Status, Trust

SEARCH_MODES = [
    ("", "Contains (browse every fact)"),
    ("keyword", "Keyword, ranked (full text)"),
    ("semantic", "Meaning, ranked (semantic)"),
    ("both", "Both, ranked (hybrid)"),
]


class FactSearchForm(forms.Form):
    """The facts browser: the filters of GET /v1/facts (same names), and a search mode."""

    q = forms.CharField(required=False, label="Search", max_length=2000)
    mode = forms.ChoiceField(required=False, choices=SEARCH_MODES, label="How")
    type = forms.CharField(required=False, max_length=200, label="Type")
    trust = forms.ChoiceField(required=False, choices=[("", "any")] + Trust.choices, label="Trust")
    status = forms.ChoiceField(required=False, choices=Status.choices, label="Status")
    participantId = forms.CharField(required=False, max_length=200, label="Participant")
    namespace = forms.CharField(required=False, max_length=200, label="Namespace")

    def ranked(self) -> bool:
        return bool(self.cleaned_data.get("q", "").strip() and self.cleaned_data.get("mode"))


class AsOfForm(forms.Form):
    """A moment in the viewer's zone (the page's script fills `tz`); without it, UTC."""

    at = forms.DateTimeField(label="As of", input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"], widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": 1}))
    tz = forms.CharField(required=False, widget=forms.HiddenInput)

    def moment(self) -> datetime:
        at = self.cleaned_data["at"]
        try:
            zone = ZoneInfo(self.cleaned_data.get("tz") or "UTC")
        except (ZoneInfoNotFoundError, ValueError):
            zone = ZoneInfo("UTC")
        # A form field under USE_TZ gives an aware time in the server's zone; the person meant theirs.
        return at.replace(tzinfo=None).replace(tzinfo=zone).astimezone(UTC)

    def clean(self):
        cleaned = super().clean()
        if "at" in cleaned:
            try:
                self.moment()
            except OverflowError:  # 0001-01-01T00:00 east of UTC, 9999-12-31T23:59 west of it
                self.add_error("at", "That moment is outside the years 1 to 9999 in UTC.")
        return cleaned


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}), label="Note")


class BulkDecisionForm(DecisionForm):
    ids = forms.TypedMultipleChoiceField(choices=[], coerce=str, label="Approvals")

    def __init__(self, *args, ids: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["ids"].choices = [(i, i) for i in ids]


APPROVAL_STATUSES = [
    (ApprovalStatus.PENDING, "Pending"), (ApprovalStatus.APPROVED, "Approved"), (ApprovalStatus.REJECTED, "Rejected"),
    (ApprovalStatus.SUPERSEDED, "Superseded"), ("all", "All"),
]


class PlaygroundForm(forms.Form):
    message = forms.CharField(label="User message", max_length=32_000, strip=False, widget=forms.Textarea(attrs={"rows": 3}))
    participant = forms.CharField(label="Participant", required=False, max_length=200, help_text="The end user the turn is for (participantId).")
    conversation = forms.UUIDField(label="Conversation", required=False, help_text="Optional: a conversation of this agent (conversationId).")


class BlockForm(forms.Form):
    prompt = forms.CharField(required=False, max_length=4000, label="Prompt", help_text="Entries that match it are kept first when cut to a budget.")
    budget = forms.IntegerField(required=False, min_value=50, max_value=100_000, label="Token budget", help_text="Empty: the whole block.")


class ApiKeyForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, label="Name", help_text="What the key is for, e.g. support-bot production.")
    user = forms.ChoiceField(label="Acts for", help_text="The key has this person's role here, capped by its access.")
    access = forms.ChoiceField(choices=Access.choices, initial=Access.READ, label="Access")
    participant_id = forms.CharField(required=False, max_length=200, label="Bound to participant", help_text="Optional: the key may then name only this end user.")

    def __init__(self, *args, members: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].choices = members


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Role.choices, label="Role in this project")


class RetentionForm(forms.Form):
    """Days until each kind of ended row is purged; empty keeps it forever."""

    deleted_facts_days = forms.IntegerField(required=False, min_value=0, label="Deleted and rejected facts", help_text="Days after a fact is deleted or rejected.")
    expired_facts_days = forms.IntegerField(required=False, min_value=0, label="Expired facts", help_text="Days after a fact's expiry.")
    unregistered_conversations_days = forms.IntegerField(required=False, min_value=0, label="Unregistered conversations", help_text="Days after a conversation is unregistered.")


class SupersedeForm(forms.Form):
    """A fact's next content (JSON), against the version the person read."""

    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 10, "class": "mono", "spellcheck": "false"}),
                              help_text="JSON: the whole new content (text, an object, a list …).")
    expect_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)

    def clean_content(self):
        import json

        try:
            return json.loads(self.cleaned_data["content"])
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}. A plain text is written in quotes, e.g. \"Prefers phone\".") from None


class AgentForm(forms.Form):
    """An agent's declaration as an admin edits it: version, instructions, intents and remember rules (JSON)."""

    version = forms.CharField(max_length=100)
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 5}))
    retrieval = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "class": "mono", "spellcheck": "false"}),
                                help_text="JSON: the list of intents, as PUT /v1/agents/{slug} takes it.")
    remember = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4, "class": "mono", "spellcheck": "false"}),
                               help_text="JSON: {types, scope, keepDays}, or empty for an agent that remembers nothing.")

    def _json(self, name: str, empty=None):
        import json

        raw = self.cleaned_data[name].strip()
        if not raw:
            return empty
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None

    def clean_retrieval(self):
        return self._json("retrieval", [])

    def clean_remember(self):
        return self._json("remember")
