"""`memoryhub`: the command line for the memoryhub API, on memoryhub.client.

    memoryhub facts write --input=@fact.json
    memoryhub facts list --type=acme.note
    memoryhub facts get ID [--revision=N | --as-of=2026-10-01T00:00:00Z]
    memoryhub facts supersede ID --input='{"content":"Prefers phone"}' --expect-version=1
    memoryhub facts verify ID
    memoryhub facts delete ID
    memoryhub facts revisions ID
    memoryhub facts batch --input=@facts.json
    memoryhub profiles import memory.json --participant end-7 [--replace]
    memoryhub profiles export --participant end-7 [--output memory.json]
    memoryhub markdown export --dir .agents/memory [--participant end-7]
    memoryhub markdown import --dir .agents/memory [--participant end-7]
    memoryhub markdown lint --dir .agents/memory
    memoryhub mcp [--agent SLUG] [--namespace NS] [--participant-id ID]   (an MCP server on stdio)

The server and key come from MEMORYHUB_URL (default http://127.0.0.1:8000) and
MEMORYHUB_API_KEY, or --url / --api-key. `--input` takes `@file`, `-` (stdin) or inline
JSON. Results print as JSON on stdout. Errors print the problem's code and detail on
stderr and exit 1 (API errors) or 2 (usage); `markdown lint` exits 1 when it finds
problems (it needs no server). Imports nothing from Django, so it starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_OK, EXIT_API, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A mistake on the command line (exit 2)."""


def _read_input(raw: str, what: str = "--input") -> Any:
    """`@file`, `-` (stdin) or inline JSON → the parsed value."""
    if raw == "-":
        text, source = sys.stdin.read(), "stdin"
    elif raw.startswith("@"):
        path = raw[1:]
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {path!r}: {exc.strerror or exc}") from None
        source = path
    else:
        text, source = raw, "the inline value"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: {source} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _days(raw: str) -> int | None:
    """A retention flag: whole days, or `forever` (kept forever)."""
    if raw == "forever":
        return None
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r}: give whole days or 'forever'") from None


def _admin(hub: Any, args: argparse.Namespace) -> Any:
    """members, keys, retention: thin doors onto the client's admin API methods."""
    project = args.project_id
    group, command = args.group, args.command
    if group == "members":
        if command == "list":
            return hub.members_list(project_id=project)
        if command == "set":
            return hub.members_set(args.user, args.role, project_id=project)
        hub.members_remove(args.user, project_id=project)
        return {"user": args.user, "removed": True}
    if group == "keys":
        if command == "list":
            return hub.keys_list(project_id=project)
        if command == "create":
            return hub.keys_create(args.access, user=args.user, participant_id=args.participant_id, name=args.name, project_id=project)
        hub.keys_revoke(args.id, project_id=project)
        return {"id": args.id, "revoked": True}
    if command == "get":
        return hub.retention_get(project_id=project)
    return hub.retention_set(
        deleted_facts_days=args.deleted_facts_days, expired_facts_days=args.expired_facts_days,
        unregistered_conversations_days=args.unregistered_conversations_days, project_id=project,
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memoryhub",
        description="Command line for the memoryhub API. Server and key: MEMORYHUB_URL, MEMORYHUB_API_KEY.",
    )
    parser.add_argument("--url", help="server base URL (default: $MEMORYHUB_URL or http://127.0.0.1:8000)")
    parser.add_argument("--api-key", help="API key (default: $MEMORYHUB_API_KEY)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)

    groups.add_parser("me", help="what the API key is (tenant, project, access, role)")

    facts = groups.add_parser("facts", help="write, read, change and delete facts").add_subparsers(
        dest="command", metavar="SUBCOMMAND", required=True
    )

    p = facts.add_parser("write", help="write one fact")
    p.add_argument("--input", required=True, help="the fact: @file, - (stdin) or inline JSON")
    p.add_argument("--idempotency-key", help="send as Idempotency-Key (a retry with it writes nothing more)")

    p = facts.add_parser("batch", help="write many facts, all or nothing")
    p.add_argument("--input", required=True, help='{"facts": [...]} or a JSON list of facts: @file, - or inline')
    p.add_argument("--idempotency-key", help="send as Idempotency-Key")

    p = facts.add_parser("list", help="list facts (newest first)")
    p.add_argument("--type")
    p.add_argument("--participant-id", "--participant", dest="participant_id")
    p.add_argument("--conversation-id")
    p.add_argument("--key")
    p.add_argument("--namespace")
    p.add_argument("--trust", help="asserted | unverified | verified")
    p.add_argument("--status", help="active (default) | pending | rejected | deleted | expired")
    p.add_argument("--q", help="keyword search")
    p.add_argument("--limit", type=int, help="page size, 1 to 500 (default 50)")
    p.add_argument("--cursor", help="nextCursor of the previous page")
    p.add_argument("--all", action="store_true", help="follow nextCursor and print every page as one list")

    p = facts.add_parser("get", help="one fact, now or as it was")
    p.add_argument("id")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--revision", type=int, metavar="N", help="that version")
    when.add_argument("--as-of", metavar="TIME", help="the revision current at TIME (ISO 8601, e.g. 2026-10-01T00:00:00Z)")

    p = facts.add_parser("supersede", help="write the fact's next revision, same id")
    p.add_argument("id")
    p.add_argument("--input", required=True, help='{"content": ...}: @file, - (stdin) or inline JSON')
    p.add_argument("--expect-version", type=int, metavar="N", help="the version you read (a stale one is refused)")

    for name, text in [
        ("verify", "mark a fact verified (reviewer or admin)"),
        ("delete", "end a fact"),
        ("revisions", "every revision of a fact, oldest first"),
    ]:
        facts.add_parser(name, help=text).add_argument("id")

    profiles = groups.add_parser("profiles", help="a participant's keyed profile: memory.json in and out").add_subparsers(
        dest="command", metavar="SUBCOMMAND", required=True
    )
    p = profiles.add_parser("import", help="import a memory.json file (new keys; changed values become next revisions)")
    p.add_argument("file", help="the memory.json file, or - for stdin")
    p.add_argument("--participant", "--participant-id", dest="participant", required=True, metavar="ID", help="whose profile")
    p.add_argument("--replace", action="store_true", help="also end the keys the file does not have")
    p = profiles.add_parser("export", help="the profile as memory.json, on stdout or into --output")
    p.add_argument("--participant", "--participant-id", dest="participant", required=True, metavar="ID", help="whose profile")
    p.add_argument("--output", metavar="FILE", help="write memory.json here instead of printing it")

    markdown = groups.add_parser("markdown", help="MEMORY.md and its topic files, in and out of a folder").add_subparsers(
        dest="command", metavar="SUBCOMMAND", required=True
    )
    for name, text in [
        ("export", "write MEMORY.md and the topic files into DIR (other files there are left alone)"),
        ("import", "read DIR's MEMORY.md and topic files back into facts (importing twice changes nothing)"),
    ]:
        p = markdown.add_parser(name, help=text)
        p.add_argument("--dir", required=True, help="the memory folder, e.g. .agents/memory")
        p.add_argument("--participant", "--participant-id", dest="participant", metavar="ID", help="whose memory (default: the project's own)")
    p = markdown.add_parser("lint", help="check DIR: index length, entry length, format; suggests merges and archiving (reads only)")
    p.add_argument("--dir", required=True, help="the memory folder, e.g. .agents/memory")

    # The admin API (docs/api.md, "Members, keys and retention"): the dashboard's settings pages, scripted.
    members = groups.add_parser("members", help="who has a role in the project (admin API)").add_subparsers(
        dest="command", metavar="COMMAND", required=True)
    members.add_parser("list", help="the memberships that give someone a role here")
    p = members.add_parser("set", help="give USER a role here (admins)")
    p.add_argument("user", help="username")
    p.add_argument("--role", required=True, choices=["viewer", "writer", "reviewer", "admin"])
    p = members.add_parser("remove", help="remove USER's role here (admins)")
    p.add_argument("user", help="username")
    keys = groups.add_parser("keys", help="the project's API keys (admin API)").add_subparsers(
        dest="command", metavar="COMMAND", required=True)
    keys.add_parser("list", help="the keys, revoked ones too; never a secret")
    p = keys.add_parser("create", help="a new key; its secret is printed once (admins)")
    p.add_argument("--access", required=True, choices=["read", "write"])
    p.add_argument("--user", help="whose key (default: yours)")
    p.add_argument("--participant-id", "--participant", dest="participant_id", help="bind the key to one end user")
    p.add_argument("--name", help="what the key is for")
    p = keys.add_parser("revoke", help="revoke key ID (admins)")
    p.add_argument("id")
    retention = groups.add_parser("retention", help="how long the project keeps what no read sees (admin API)").add_subparsers(
        dest="command", metavar="COMMAND", required=True)
    retention.add_parser("get", help="the days each kind of row is kept")
    p = retention.add_parser("set", help="set all three (admins); 'forever' keeps that kind forever")
    for flag in ("--deleted-facts-days", "--expired-facts-days", "--unregistered-conversations-days"):
        p.add_argument(flag, required=True, type=_days, metavar="DAYS|forever")
    for sub in (*members.choices.values(), *keys.choices.values(), *retention.choices.values()):
        sub.add_argument("--project-id", help="for a tenant-wide key: the project")

    p = groups.add_parser("mcp", help="serve memoryhub's tools to an MCP host over stdio (docs/mcp.md)")
    p.add_argument("--agent", help="agent slug for memory_context and memory_remember (default: $MEMORYHUB_AGENT)")
    p.add_argument("--namespace", help="working-memory namespace (default: $MEMORYHUB_NAMESPACE, else 'default')")
    p.add_argument("--participant-id", "--participant", dest="participant_id", help="the end user the calls are for (default: $MEMORYHUB_PARTICIPANT_ID, else the key's)")
    p.add_argument("--conversation-id", help="the conversation the calls belong to (default: $MEMORYHUB_CONVERSATION_ID)")
    p.add_argument("--project-id", help="for a tenant-wide key: the project (default: $MEMORYHUB_PROJECT_ID)")
    return parser


def _serve_mcp(hub: Any, args: argparse.Namespace) -> None:
    """`memoryhub mcp`: stdout carries the protocol from here on; nothing else may print there."""
    from memoryhub.mcp_tools import Binding, serve_stdio

    binding = Binding.from_env(
        agent=args.agent, namespace=args.namespace, participant_id=args.participant_id,
        conversation_id=args.conversation_id, project_id=args.project_id,
    )
    serve_stdio(hub, binding)


def _read_folder(directory: str) -> dict[str, str]:
    """MEMORY.md and the topic files of a memory folder (not archive/), as they are on disk."""
    import os

    if not os.path.isdir(directory):
        raise UsageError(f"--dir: {directory!r} is not a folder")
    files = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith(".md") and os.path.isfile(path):
            try:
                with open(path, encoding="utf-8", newline="") as handle:
                    files[name] = handle.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"--dir: cannot read {name}: {exc}") from None
    if not files:
        raise UsageError(f"--dir: no .md files in {directory!r}")
    return files


def _write_folder(directory: str, files: dict[str, str]) -> list[str]:
    import os

    os.makedirs(directory, exist_ok=True)
    for name, text in files.items():
        if os.sep in name or (os.altsep and os.altsep in name) or name.startswith("."):
            raise UsageError(f"the server sent an unsafe file name {name!r}")  # pragma: no cover (server names are checked)
        with open(os.path.join(directory, name), "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    return list(files)


def _dump(memory: Any) -> str:
    """memory.json as export writes it (and as this CLI prints JSON)."""
    return json.dumps(memory, indent=2, ensure_ascii=False) + "\n"


def _local(args: argparse.Namespace) -> Any:
    """What a command reads from disk, read before the key and the network."""
    if args.group == "profiles" and args.command == "import":
        memory = _read_input(args.file if args.file == "-" else "@" + args.file, "FILE")
        if not isinstance(memory, dict):
            raise UsageError("FILE: a memory.json file holds one JSON object of key: value")
        return memory
    if args.group == "markdown":
        return _read_folder(args.dir) if args.command in ("import", "lint") else None
    return None


def _sending(what: str, count: int, unit: str, payload: Any):
    """A progress line while a large import is on its way (a terminal only, not CI)."""
    from core.progress import Progress

    progress = Progress(what)
    size = len(json.dumps(payload, ensure_ascii=False).encode())
    progress.say(f"sending {count:,} {unit} ({size / 1e6:.1f} MB), waiting for the server…")
    return progress


def _profiles(hub: Any, args: argparse.Namespace, memory: Any) -> Any:
    if args.command == "import":
        with _sending("profiles import", len(memory), "keys", memory):
            return hub.profile_import(args.participant, memory, replace=args.replace)
    exported = hub.profile_memory(args.participant)
    if args.output is None:
        return exported
    try:
        with open(args.output, "w", encoding="utf-8", newline="") as handle:
            handle.write(_dump(exported))
    except OSError as exc:
        raise UsageError(f"--output: cannot write {args.output!r}: {exc.strerror or exc}") from None
    return {"participantId": args.participant, "file": args.output, "keys": len(exported)}


def _markdown(hub: Any, args: argparse.Namespace, files: Any) -> Any:
    if args.command == "import":
        with _sending("markdown import", len(files), "files", files):
            return hub.markdown_import(files, participant_id=args.participant) | {"dir": args.dir}
    written = _write_folder(args.dir, hub.markdown_export(participant_id=args.participant))
    return {"dir": args.dir, "participantId": args.participant, "files": written}


def _run(args: argparse.Namespace) -> Any:
    from memoryhub.client import MemoryHub  # httpx is imported only when a command runs

    # Read and check the input before the key and the network, so usage errors come first.
    payload = _read_input(args.input) if getattr(args, "input", None) is not None else None
    local = _local(args)
    if args.group == "markdown" and args.command == "lint":
        from profiles.markdown import lint  # pure: no server, no Django

        report = lint(local)
        args.exit_code = EXIT_OK if report["ok"] else EXIT_API
        return report | {"dir": args.dir}

    with MemoryHub(url=args.url, api_key=args.api_key, timeout=args.timeout) as hub:
        if args.group == "mcp":
            return _serve_mcp(hub, args)
        if args.group == "me":
            return hub.me()
        if args.group == "profiles":
            return _profiles(hub, args, local)
        if args.group == "markdown":
            return _markdown(hub, args, local)
        if args.group in ("members", "keys", "retention"):
            return _admin(hub, args)
        command = args.command
        if command == "write":
            if not isinstance(payload, dict):
                raise UsageError("--input: a fact is a JSON object, e.g. {\"type\": \"acme.note\", \"content\": {...}}")
            return hub.facts_write(payload, idempotency_key=args.idempotency_key)
        if command == "batch":
            items = payload.get("facts") if isinstance(payload, dict) else payload
            if not isinstance(items, list):
                raise UsageError('--input: give {"facts": [...]} or a JSON list of facts')
            return {"facts": hub.facts_write_batch(items, idempotency_key=args.idempotency_key)}
        if command == "list":
            filters = {
                "type": args.type, "participant_id": args.participant_id, "conversation_id": args.conversation_id,
                "key": args.key, "namespace": args.namespace, "trust": args.trust, "status": args.status,
                "q": args.q, "limit": args.limit, "cursor": args.cursor,
            }
            if args.all:
                return {"data": list(hub.facts_iter(**filters)), "nextCursor": None}
            return hub.facts_list(**filters)
        if command == "get":
            return hub.facts_get(args.id, revision=args.revision, as_of=args.as_of)
        if command == "supersede":
            if not isinstance(payload, dict) or "content" not in payload:
                raise UsageError('--input: give {"content": ...}, e.g. --input=\'{"content":"Prefers phone"}\'')
            unknown = sorted(set(payload) - {"content", "expectVersion"})
            if unknown:
                raise UsageError(f"--input: supersede takes content only (and expectVersion), not {', '.join(unknown)}")
            expect = args.expect_version if args.expect_version is not None else payload.get("expectVersion")
            return hub.facts_supersede(args.id, payload["content"], expect_version=expect)
        if command == "verify":
            return hub.facts_verify(args.id)
        if command == "delete":
            hub.facts_delete(args.id)
            return {"id": args.id, "deleted": True}
        if command == "revisions":
            return {"data": hub.facts_revisions(args.id), "nextCursor": None}
    raise UsageError(f"unknown command {command!r}")  # pragma: no cover (argparse refuses it first)


def _report(error: Any, args: argparse.Namespace | None) -> None:
    """The problem on stderr: code, status and detail, then field errors and extras."""
    status = f" ({error.status})" if error.status else ""
    lines = [f"memoryhub: error: {error.code}{status}: {error.detail}"]
    for field, messages in error.errors.items():
        for message in messages if isinstance(messages, list) else [messages]:
            if f"{field}: {message}" != error.detail:  # the detail already says it
                lines.append(f"  {field}: {message}")
    for name, value in error.problem.items():
        if name not in {"type", "title", "status", "detail", "code", "errors"}:
            lines.append(f"  {name}: {json.dumps(value, ensure_ascii=False)}")
    if error.code == "precondition-required" and getattr(args, "command", None) == "supersede":
        lines.append("  hint: pass --expect-version=N with the version you read (memoryhub facts get ID)")
    elif error.code == "version-conflict" and getattr(args, "command", None) == "supersede":
        lines.append("  hint: read the fact again (memoryhub facts get ID) and retry with its version")
    sys.stderr.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or --help)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    from memoryhub.client import MemoryHubError

    try:
        result = _run(args)
    except UsageError as exc:
        sys.stderr.write(f"memoryhub: error: {exc}\n")
        return EXIT_USAGE
    except MemoryHubError as exc:
        _report(exc, args)
        return EXIT_USAGE if exc.code == "missing-api-key" else EXIT_API
    except ValueError as exc:  # e.g. a bad --as-of the client refuses
        sys.stderr.write(f"memoryhub: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("memoryhub: interrupted\n")
        return 130
    if args.group == "mcp":  # the host closed the session: stdout was the protocol's
        return EXIT_OK
    try:
        _print_json(result)
    except BrokenPipeError:  # `memoryhub facts list | head`
        sys.stderr.close()
    return getattr(args, "exit_code", EXIT_OK)


if __name__ == "__main__":
    raise SystemExit(main())
