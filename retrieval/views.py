"""Retrieval API: a thin door onto retrieval.search."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from facts.serializers import fact_to_dict
from memoryhub.api import ApiView
from retrieval.search import Run, facts_retrieve, parse_intent
from retrieval.serializers import RetrieveInSerializer, RetrieveOutSerializer


class RetrieveView(ApiView):
    # A read: replaying it by Idempotency-Key would serve stale memory.
    idempotent_methods = frozenset()

    @extend_schema(operation_id="retrieve", request=RetrieveInSerializer, responses=RetrieveOutSerializer)
    def post(self, request):
        serializer = RetrieveInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        intents = [parse_intent(raw, index) for index, raw in enumerate(data["intents"])]
        principal = self.principal
        participant_id = data.get("participantId") or principal.participant_id
        principal.require_participant(participant_id)
        run = Run(
            principal=principal, query=data["query"], participant_id=participant_id,
            conversation_id=str(data["conversationId"]) if data.get("conversationId") else None,
            project_id=principal.project_for(data.get("projectId")),
        )
        result = facts_retrieve(run=run, intents=intents)
        return Response(
            {
                "facts": [
                    {"fact": fact_to_dict(hit.fact), "ranks": hit.ranks, "score": hit.score, "intent": hit.intent.as_dict()}
                    for hit in result.hits
                ],
                "recalled": [],
                "warnings": result.warnings,
            }
        )
