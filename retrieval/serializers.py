"""Retrieval request and response shapes (API.md `POST /v1/retrieve`)."""

from rest_framework import serializers

from facts.models import TRUST_ASCENDING
from facts.serializers import FactOutSerializer, StrictSerializer


class IntentSerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=["facts", "conversations"], required=False, default="facts")
    types = serializers.ListField(child=serializers.CharField(), required=False)
    scope = serializers.ChoiceField(choices=["same-conversation", "same-user", "same-segment", "same-project", "tenant"])
    mode = serializers.ChoiceField(choices=["none", "keyword", "semantic", "both"], required=False, default="none")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=10)
    roles = serializers.ListField(child=serializers.ChoiceField(choices=["user", "agent"]), required=False)
    match = serializers.ChoiceField(choices=["all", "any"], required=False, help_text="keyword leg: every word first, then any word by BM25 (default), or any word, BM25-ranked")
    fusion = serializers.ChoiceField(choices=["rrf", "score"], required=False, help_text="mode both: RRF k=60 (default) or mean of min-max normalised scores")
    rerank = serializers.BooleanField(required=False, help_text="facts, modes keyword/semantic/both: reorder the fused candidates by the in-process reranker (default false)")
    neighbours = serializers.FloatField(
        required=False, min_value=0, max_value=1,
        help_text="conversations, modes keyword/semantic/both: a message's score gains this x the score of each candidate next to it (half that two messages away), those messages become candidates too, and the semantic leg reads each message with the ones either side at this weight (default 0: off)",
    )
    keywordWeight = serializers.FloatField(
        required=False, min_value=0, max_value=1,
        help_text="mode both with fusion score: the keyword leg's share of the score, the semantic leg's the rest (default 0.5)",
    )
    minTrust = serializers.ChoiceField(
        choices=TRUST_ASCENDING, required=False,
        help_text="facts: only facts of at least this trust (at equal relevance, verified > asserted > unverified anyway)",
    )


class RetrieveInSerializer(StrictSerializer):
    query = serializers.CharField(allow_blank=True, max_length=16384, trim_whitespace=False)
    participantId = serializers.CharField(required=False, allow_null=True, max_length=200)
    conversationId = serializers.UUIDField(required=False, allow_null=True)
    segment = serializers.CharField(required=False, allow_null=True, max_length=500, help_text="recall same-segment: the run's segment path, when its conversation has none")
    agent = serializers.CharField(required=False, allow_null=True, max_length=200, help_text="recall: whose conversations (default: the conversation's agent)")
    projectId = serializers.UUIDField(required=False, allow_null=True, help_text="for tenant-wide keys: the run's project")
    # Intents are validated by retrieval.search.parse_intent (one rule for the API and agents).
    intents = serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=20)


class RanksSerializer(serializers.Serializer):
    keyword = serializers.IntegerField(required=False)
    semantic = serializers.IntegerField(required=False)
    rerank = serializers.IntegerField(required=False, help_text="the place the reranker gave (intents with rerank: true)")


class FactHitSerializer(serializers.Serializer):
    fact = FactOutSerializer()
    ranks = RanksSerializer()
    score = serializers.FloatField()
    intent = IntentSerializer()


class WarningSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    facts = serializers.ListField(
        child=serializers.UUIDField(), required=False,
        help_text="memory-conflict: the ids of the facts that share a key (or type and subjects) and disagree",
    )


class RetrieveOutSerializer(serializers.Serializer):
    facts = FactHitSerializer(many=True)
    recalled = serializers.ListField(child=serializers.DictField())
    warnings = WarningSerializer(many=True)
