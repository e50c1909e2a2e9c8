"""accounts: tenants, projects, members and roles, API keys (and their authentication), retention policies."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    # The tables (memoryhub_tenant, memoryhub_apikey, …) and migrations were made under the
    # label `memoryhub` when these models lived in the memoryhub package: the label stays,
    # so moving the code needed no data migration.
    label = "memoryhub"
    verbose_name = "memoryhub: tenancy and keys"
