"""Long training sequences for the tiny GLM-5 model with structure that reaches far back, from a
seed (deterministic) and a split (train or held-out stdlib files, the trainers' own 95/5 split).

A sequence of `length` tokens is:

1. whole stdlib source files of the split, in a seeded order, joined by eos (long files are long
   in-context text);
2. "references back": after each file past the first, with probability `copy_prob`, a comment
   `# again, from above:` and a copy of 32-192 tokens from a file at least `min_gap` tokens
   earlier, which only attention that far back predicts;
3. a planted retrieval: a line `NAME = 'value'` (an identifier and 6 hex digits, both random) put
   `gap` tokens before the end, gap drawn from [min_gap, max_gap] (1k-30k by default, as far as
   the sequence allows), and the sequence ends with `assert NAME == 'value'`: the value's tokens
   are predictable only from the planted line. `Sample.answer` marks them.

Train and held-out sequences never share a source file, and their seeds are drawn apart.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from sglang_mx_lab.testing.corpus import stdlib_files

WORDS = ("alpha", "delta", "gamma", "kappa", "omega", "sigma", "theta", "zeta", "rho", "tau")


@dataclass(frozen=True)
class Sample:
    ids: torch.Tensor  # [length + 1] token ids (inputs ids[:-1], targets ids[1:])
    answer: torch.Tensor  # [length] bool: targets that are the planted value's tokens
    gap: int  # tokens from the planted line to the end
    plant_len: int = 0  # tokens of the planted line (it starts at len(ids) - gap)


class LongData:
    """Seeded long sequences from one split of the stdlib corpus."""

    def __init__(self, tokenizer, split: str, seed: int = 0, min_gap: int = 1024,
                 max_gap: int = 30720, copy_prob: float = 0.5):  # fmt: skip
        if split not in ("train", "held"):
            raise ValueError(f"split must be 'train' or 'held', not {split!r}")
        train, held = stdlib_files()
        self.texts = train if split == "train" else held
        self.tok, self.eos = tokenizer, tokenizer.eos_token_id
        # Split-specific stream of seeds: sample i of a split is the same on every machine.
        self.seed = seed * 2 + (split == "held")
        self.min_gap, self.max_gap, self.copy_prob = min_gap, max_gap, copy_prob
        self._cache: dict[int, list[int]] = {}

    def _file(self, i: int) -> list[int]:
        if i not in self._cache:
            self._cache[i] = self.tok(self.texts[i], add_special_tokens=False)["input_ids"]
        return self._cache[i]

    def _encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def sample(self, index: int, length: int, gap: int | None = None) -> Sample:
        """Sequence `index` of `length` tokens; `gap` puts the planted line that far from the end
        (the retrieval probe) instead of the seeded draw (which is made either way, so the rest
        of the sequence is the same)."""
        rng = random.Random(self.seed * 1_000_003 + index)
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{rng.randrange(100, 1000)}"
        value = f"{rng.randrange(16**6):06x}"
        plant = self._encode(f"{name} = '{value}'\n")
        ask = self._encode(f"\nassert {name} == '")
        answer = self._encode(value)
        tail = self._encode("'\n")
        lo = min(self.min_gap, length // 2)
        drawn = rng.randint(lo, max(lo, min(self.max_gap, length - len(plant) - 64)))
        gap = drawn if gap is None else min(gap, length - len(plant) - 64)
        body = length + 1 - len(ask) - len(answer) - len(tail)
        text: list[int] = []
        starts: list[int] = []  # where each file begins in `text`
        while len(text) < body:
            if starts and rng.random() < self.copy_prob:
                far = [s for s in starts if s <= len(text) - self.min_gap]
                if far:
                    src = rng.choice(far)
                    n = rng.randint(32, 192)
                    text += self._encode("\n# again, from above:\n") + text[src : src + n]
            starts.append(len(text))
            text += self._file(rng.randrange(len(self.texts))) + [self.eos]
        text = text[:body]
        at = body - (gap - len(ask) - len(answer) - len(tail))
        at = max(0, min(at, body - len(plant)))
        text[at : at + len(plant)] = plant
        ids = torch.tensor(text + ask + answer + tail, dtype=torch.long)[: length + 1]
        marks = torch.zeros(length, dtype=torch.bool)
        end = body + len(ask)  # ids index of the first answer token
        marks[end - 1 : end - 1 + len(answer)] = True
        return Sample(ids, marks, len(ids) - at, min(len(plant), len(ids) - at))
