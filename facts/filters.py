"""List filters for GET /v1/facts (django-filter), in the API's camelCase names."""

import django_filters

from facts.models import Fact, Status, Trust


class FactFilter(django_filters.FilterSet):
    type = django_filters.CharFilter(field_name="type")
    participantId = django_filters.CharFilter(field_name="participant_id")
    conversationId = django_filters.UUIDFilter(field_name="conversation_id")
    key = django_filters.CharFilter(field_name="key")
    namespace = django_filters.CharFilter(field_name="namespace")
    trust = django_filters.ChoiceFilter(field_name="trust", choices=Trust.choices)
    # `status` picks the base set in facts.selectors.facts_list; declared here for validation.
    status = django_filters.ChoiceFilter(choices=Status.choices, method="keep")
    q = django_filters.CharFilter(field_name="text", lookup_expr="icontains")

    class Meta:
        model = Fact
        fields: list[str] = []

    def keep(self, queryset, name, value):
        return queryset
