"""Bad input is a 400 that changes nothing: generated from every /v1 endpoint, /mcp and the dashboard.

Issue 17 item 8 found sixteen kinds of input that reached parsing or the database and came
back 500 (on /mcp, Django's HTML page): JSON nested about a thousand deep, impossible
dates and offsets, lone surrogates (`"\\ud800"`), odd namespaces in dashboard URLs. The
cases here are generated, not listed: every endpoint of the isolation matrix (which
tests/test_isolation.py keeps equal to the URL conf) with its valid body, each string in
that body (and each key) in turn made to carry a lone surrogate or a NUL, the whole body
nested too deep, a query parameter carrying a NUL; every time a body or query takes, given
each impossible time. Each answer must be a 400 problem+json, and no table may differ
afterwards (an md5 of every row of every table the API writes).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from hypothesis import given, strategies as st

from core.parsers import MAX_BODY_DEPTH, json_depth_exceeds
from core.times import parse_time
from tests.test_isolation import ENDPOINTS, _target

PROBLEM = "application/problem+json"
SURROGATE, NUL = "\ud800", "\x00"

# Impossible dates, hours and offsets, and times an offset carries outside years 1-9999 in UTC.
BAD_TIMES = [
    "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00+25:00",
    "2026-01-01T00:00:00-24:00", "0000-01-01T00:00:00Z", "10000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00", "not a time",
]


def _tables() -> list[str]:
    from django.apps import apps

    wanted = {"facts", "retrieval", "approvals", "memoryhub"}
    return sorted(m._meta.db_table for m in apps.get_models() if m._meta.app_label in wanted and m._meta.db_table != "memoryhub_apikey")


def _snapshot() -> dict[str, str]:
    """Every row of every table the API writes, as one md5 per table (API keys left out: using one stamps it)."""
    with connection.cursor() as cursor:
        sums = {}
        for table in _tables():
            cursor.execute(f'SELECT count(*), md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) FROM "{table}" t')
            sums[table] = cursor.fetchone()
        return sums


def _assert_refused(response, label: str) -> None:
    assert response.status_code == 400, (label, response.status_code, response.content[:300])
    assert response["Content-Type"] == PROBLEM, (label, response["Content-Type"])
    body = response.json()
    assert body["status"] == 400 and body["code"] == "validation-error" and body["errors"], (label, body)


def _leaves(value, path=()):
    """Paths to every string in a JSON value, dict keys included (as ("key", name))."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield (*path, ("key", key))
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))


def _with(value, path, bad: str):
    """A copy of `value` whose string (or key) at `path` carries `bad` in its middle."""
    if not path:
        return value[:1] + bad + value[1:]
    head, *rest = path
    if isinstance(head, tuple):  # a dict key
        return {(k[:1] + bad + k[1:] if k == head[1] else k): v for k, v in value.items()}
    if isinstance(value, dict):
        return {k: (_with(v, rest, bad) if k == head else v) for k, v in value.items()}
    return [(_with(v, rest, bad) if i == head else v) for i, v in enumerate(value)]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _endpoint(world, name: str):
    """The endpoint and its URL, naming an object of the owner's made for it."""
    endpoint = ENDPOINTS[name]
    return endpoint, endpoint.path.format(fact=_target(world, "owner", endpoint.target))


BODY_CASES = [(name, method) for name, endpoint in ENDPOINTS.items() for method, body in endpoint.methods.items() if body is not None]
ALL_CASES = [(name, method) for name, endpoint in ENDPOINTS.items() for method in endpoint.methods]


@pytest.mark.django_db
@pytest.mark.parametrize("name, method", BODY_CASES, ids=[f"{n}-{m}" for n, m in BODY_CASES])
def test_every_body_refuses_unstorable_text_and_deep_nesting(world, settings, name, method):
    settings.MEMORYHUB_RATE_LIMIT = ""
    endpoint, url = _endpoint(world, name)
    client = world.client()
    body = endpoint.methods[method] or {"note": "fine"}  # an empty body: spoil a field it may carry
    before = _snapshot()
    sent = getattr(client, method)
    cases = [(f"{kind} at {path}", _with(body, path, bad)) for path in _leaves(body) for kind, bad in (("surrogate", SURROGATE), ("NUL", NUL))]
    assert len(cases) >= 2, "every body holds a string to spoil"
    for label, spoiled in cases:
        # ensure_ascii writes the lone surrogate as the \ud800 escape a client sends.
        response = sent(url, json.dumps(spoiled, ensure_ascii=True), content_type="application/json")
        _assert_refused(response, label)
        assert "surrogate" in response.json()["detail"] or "NUL" in response.json()["detail"], (label, response.json())
    for depth in (MAX_BODY_DEPTH + 1, 1000, 100_000):
        response = sent(url, _nested(depth), content_type="application/json")
        _assert_refused(response, f"nested {depth} deep")
        assert response.json()["errors"] == {"body": [f"the body nests deeper than {MAX_BODY_DEPTH} levels"]}
        wrapped = sent(url, json.dumps({"x": json.loads(_nested(MAX_BODY_DEPTH))}), content_type="application/json")
        _assert_refused(wrapped, "one level too deep inside an object")
    assert _snapshot() == before, f"{method.upper()} {url} wrote something while refusing"


@pytest.mark.django_db
@pytest.mark.parametrize("name, method", ALL_CASES, ids=[f"{n}-{m}" for n, m in ALL_CASES])
def test_every_endpoint_refuses_unstorable_query_text(world, settings, name, method):
    settings.MEMORYHUB_RATE_LIMIT = ""
    endpoint, url = _endpoint(world, name)
    before = _snapshot()
    glue = "&" if "?" in url else "?"
    for query in ("q=a%00b", "a%00=1"):
        response = getattr(world.client(), method)(f"{url}{glue}{query}", endpoint.methods[method], format="json")
        _assert_refused(response, query)
        assert next(iter(response.json()["errors"])).startswith("query."), response.json()
    assert _snapshot() == before


# --- times: every field and parameter that takes one ------------------------------------------------


def _time_requests(world) -> list[tuple[str, str, object]]:
    """(method, url, body with the time at `{t}`) for every place the API takes a client's time."""
    client = world.client()
    assert client.post("/v1/agents", {"slug": "t.desk", "memory": {"remember": {"types": ["acme.preference"], "scope": "same-project"}}},
                       format="json").status_code == 201
    conversation = client.post("/v1/conversations", {"agent": "t.desk"}, format="json").json()["id"]
    fact = client.post("/v1/facts", {"type": "acme.note", "content": "x"}, format="json").json()["id"]
    note = {"type": "acme.note", "content": "timed"}
    return [
        ("post", f"/v1/conversations/{conversation}/messages", {"messages": [{"role": "user", "text": "hi", "createdAt": "{t}"}]}),
        ("post", "/v1/facts", note | {"validFrom": "{t}"}),
        ("post", "/v1/facts", note | {"validUntil": "{t}"}),
        ("post", "/v1/facts", note | {"expiresAt": "{t}"}),
        ("post", "/v1/facts/batch", {"facts": [note | {"validUntil": "{t}"}]}),
        ("post", "/v1/agents/t.desk/remember", {"arguments": {"type": "acme.preference", "content": "x", "validUntil": "{t}"}}),
        ("get", f"/v1/facts/{fact}?asOf={{t}}", None),
        ("get", "/v1/facts?cursor={cursor}", None),
        ("get", "/v1/approvals?cursor={cursor}", None),
    ]


def _cursor(time: str) -> str:
    import base64

    return base64.urlsafe_b64encode(json.dumps([time, "00000000-0000-0000-0000-000000000000"]).encode()).decode().rstrip("=")


@pytest.mark.django_db
def test_impossible_times_are_refused_everywhere(world, settings):
    from urllib.parse import quote

    settings.MEMORYHUB_RATE_LIMIT = ""
    client = world.client()
    requests = _time_requests(world)
    before = _snapshot()
    for method, url, body in requests:
        for time in BAD_TIMES:
            label = f"{method.upper()} {url} with {time}"
            target = url.replace("{t}", quote(time)).replace("{cursor}", _cursor(time))
            data = json.loads(json.dumps(body).replace("{t}", time)) if body is not None else None
            response = getattr(client, method)(target, data, format="json")
            if "remember" in url:  # the remember tool answers a refusal as its result, for the model
                assert response.status_code in (200, 400) and "validUntil" in response.content.decode(), (label, response.content[:300])
                continue
            _assert_refused(response, label)
    assert _snapshot() == before


@given(st.text(max_size=40) | st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?([+-][0-9]{2}:[0-9]{2}|Z)?\Z"))
def test_parse_time_never_raises_and_gives_utc_within_range(text):
    parsed = parse_time(text)
    assert parsed is None or (parsed.utcoffset().total_seconds() == 0 and 1 <= parsed.year <= 9999)


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones()))
def test_parse_time_reads_every_real_time(moment):
    text = moment.isoformat()
    try:
        expected = moment.astimezone(UTC)
    except OverflowError:
        assert parse_time(text) is None
        return
    assert parse_time(text) == expected


def test_depth_is_counted_outside_strings_only():
    assert not json_depth_exceeds(json.dumps({"text": "[" * 5000}).encode())
    assert not json_depth_exceeds(json.dumps([[1]] * 5000).encode())  # wide is fine
    assert not json_depth_exceeds(json.dumps({"a": '\\"[' * 300}).encode())  # escaped quotes stay inside
    assert json_depth_exceeds(_nested(MAX_BODY_DEPTH + 1).encode())
    assert not json_depth_exceeds(_nested(MAX_BODY_DEPTH).encode())


def test_the_parser_refuses_what_postgresql_cannot_store_however_it_is_written():
    import io

    from core.errors import ValidationFailed
    from core.parsers import JSONParser

    def parse(raw: bytes, encoding: str = "utf-8"):
        return JSONParser().parse(io.BytesIO(raw), "application/json", {"encoding": encoding})

    fine = {"t": "caf\u00e9 \U0001F600 \\u0000 \\ud800"}  # a surrogate pair, and escapes that are only text
    assert parse(json.dumps(fine).encode()) == fine
    assert parse(json.dumps(fine, ensure_ascii=False).encode()) == fine
    for raw, encoding in [(b'{"t": "\\ud800"}', "utf-8"), (b'{"t": "a\\u0000"}', "utf-8"), (b'{"\\uDC00": 1}', "utf-8"),
                          ('{"t": ["\\udfff"]}'.encode("utf-16"), "utf-16")]:
        with pytest.raises(ValidationFailed):
            parse(raw, encoding)


# --- /mcp ---------------------------------------------------------------------------------------------

MCP = {"HTTP_ACCEPT": "application/json, text/event-stream", "HTTP_MCP_PROTOCOL_VERSION": "2025-06-18"}


def _tool_call(name: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


@pytest.mark.django_db
def test_mcp_answers_bad_input_with_problem_json_or_a_json_rpc_error_never_html(world, settings):
    settings.MEMORYHUB_RATE_LIMIT = ""
    client = world.client()
    before = _snapshot()
    for depth in (MAX_BODY_DEPTH + 1, 1000, 100_000):
        response = client.post("/mcp?namespace=ws", _nested(depth), content_type="application/json", **MCP)
        _assert_refused(response, f"/mcp nested {depth}")
    save = _tool_call("memory_save", {"key": "k", "value": "v"})
    for path in _leaves(save):
        for bad in (SURROGATE, NUL):
            spoiled = _with(save, path, bad)
            response = client.post("/mcp?namespace=ws", json.dumps(spoiled, ensure_ascii=True), content_type="application/json", **MCP)
            label = f"/mcp {bad!r} at {path}"
            assert response.status_code < 500, (label, response.content[:300])
            if response["Content-Type"] == PROBLEM:
                _assert_refused(response, label)
            else:  # the SDK's own answer: a JSON-RPC error, or the tool's error result
                answer = response.json()
                assert "error" in answer or answer["result"]["isError"], (label, answer)
    assert _snapshot() == before
    ok = client.post("/mcp?namespace=ws", json.dumps(save), content_type="application/json", **MCP)
    assert ok.status_code == 200 and not ok.json()["result"]["isError"]  # the same call, unspoiled, works


def test_a_server_error_on_mcp_is_problem_json(rf):
    from memoryhub.views import server_error

    response = server_error(rf.post("/mcp"))
    assert response.status_code == 500 and response["Content-Type"] == PROBLEM


# --- the dashboard --------------------------------------------------------------------------------------

ODD_NAMESPACES = ["a b", "x" * 201, "a%00", "%C3%A9t%C3%A9", "a%3Fb", "a%5Cb", "%ED%A0%80", "a;b", "a,b"]


@pytest.mark.django_db
def test_dashboard_pages_refuse_odd_urls_with_a_400(world):
    from django.test import Client

    client = Client()
    client.force_login(world.alice)
    api = world.client()
    fact = api.post("/v1/facts", {"type": "acme.note", "content": "x"}, format="json").json()["id"]
    assert api.post("/v1/workspaces/ws/memory", {"key": "a", "value": "b"}, format="json").status_code == 201
    base = "/dashboard/acme/desk"
    urls = [f"{base}/memory/{namespace}/" for namespace in ODD_NAMESPACES]
    urls += [f"{base}/facts/{fact}/?asOf={time.replace('+', '%2B')}" for time in BAD_TIMES]
    urls += [f"{base}/agents/a%00/", f"{base}/conversations/?agent=a%00", f"{base}/conversations/?participant=%00", f"{base}/facts/?a%00=1"]
    before = _snapshot()
    for url in urls:
        # A browser (it asks for HTML) gets a page with the reason, as for the dashboard's 403 and 404;
        response = client.get(url, HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
        assert response.status_code == 400, (url, response.status_code, response.content[:300])
        assert response["Content-Type"].startswith("text/html")
        assert b"Bad request" in response.content
        # any other client a problem, as from the API.
        response = client.get(url, HTTP_ACCEPT="*/*")
        assert response.status_code == 400 and response["Content-Type"] == "application/problem+json", url
        assert response.json()["code"] == "validation-error" and response.json()["detail"]
    assert _snapshot() == before
    assert client.get(f"{base}/memory/ws/").status_code == 200  # a good namespace still reads


@pytest.mark.django_db
def test_dashboard_as_of_form_outside_the_calendar_is_a_form_error(world):
    from django.test import Client

    client = Client()
    client.force_login(world.alice)
    fact = world.client().post("/v1/facts", {"type": "acme.note", "content": "x"}, format="json").json()["id"]
    for query in ("at=0001-01-01T00:00&tz=Asia/Tokyo", "at=9999-12-31T23:59&tz=Etc/GMT%2B12"):
        response = client.get(f"/dashboard/acme/desk/facts/{fact}/?{query}")
        assert response.status_code == 200
        assert "outside the years 1 to 9999" in response.content.decode()
