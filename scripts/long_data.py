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
   are predictable only from the planted line. `Sample.answer` marks them. With `plants` > 1,
   the other lines go in at gaps of their own drawn from the same range (never overlapping), and
   their asserts come before the first line's, in a seeded order: more retrieval signal per
   step where a step is minutes long (32k). Their draws come from a stream of their own, so
   `plants=1` gives the same sequences as before the option (the probes' held-out sequences).

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
                 max_gap: int = 30720, copy_prob: float = 0.5, plants: int = 1):  # fmt: skip
        if split not in ("train", "held"):
            raise ValueError(f"split must be 'train' or 'held', not {split!r}")
        if plants < 1:
            raise ValueError(f"plants must be at least 1, not {plants}")
        self.plants = plants
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
        extra = random.Random((self.seed * 1_000_003 + index) * 7 + 1)  # the other plants'
        keys = [self._key(rng)] + [self._key(extra) for _ in range(self.plants - 1)]
        keys = keys[:1] + [k for k in dict(keys[1:]).items() if k[0] != keys[0][0]]  # distinct
        plant = self._encode(f"{keys[0][0]} = '{keys[0][1]}'\n")
        lo = min(self.min_gap, length // 2)
        hi = max(lo, min(self.max_gap, length - len(plant) - 64))
        drawn = rng.randint(lo, hi)
        gap = drawn if gap is None else min(gap, length - len(plant) - 64)
        # the closing asserts: the other plants' in a seeded order, the first plant's last
        order = keys[1:]
        extra.shuffle(order)
        closing = [self._question(name, value) for name, value in order + keys[:1]]
        body = length + 1 - sum(len(a) + len(v) + len(t) for a, v, t in closing)
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
        at = max(0, min(length + 1 - gap, body - len(plant)))
        text[at : at + len(plant)] = plant
        taken = [(at, at + len(plant))]
        for name, value in keys[1:]:
            line = self._encode(f"{name} = '{value}'\n")
            for _ in range(100):  # a gap of its own, clear of every line already planted
                where = length + 1 - extra.randint(lo, hi)
                span = (where, where + len(line))
                if (
                    0 <= where
                    and span[1] <= body
                    and all(span[1] <= a or b <= span[0] for a, b in taken)
                ):
                    text[where : span[1]] = line
                    taken.append(span)
                    break
            else:  # its assert would ask for a line that is not there
                raise ValueError(f"no room for {self.plants} planted lines at gaps {lo}-{hi} "
                                 f"in {length} tokens")  # fmt: skip
        ids = text
        marks = []  # ids indices of the answer tokens
        for ask, answer, tail in closing:
            marks += range(len(ids) + len(ask), len(ids) + len(ask) + len(answer))
            ids = ids + ask + answer + tail
        answer_mask = torch.zeros(length, dtype=torch.bool)
        answer_mask[[m - 1 for m in marks if m - 1 < length]] = True
        ids = torch.tensor(ids, dtype=torch.long)[: length + 1]
        return Sample(ids, answer_mask, len(ids) - at, min(len(plant), len(ids) - at))

    @staticmethod
    def _key(rng: random.Random) -> tuple[str, str]:
        """A planted name and its value (6 hex digits)."""
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{rng.randrange(100, 1000)}"
        return name, f"{rng.randrange(16**6):06x}"

    def _question(self, name: str, value: str) -> tuple[list[int], list[int], list[int]]:
        """The closing assert's tokens: the ask, the value (the answer) and the line's end."""
        return (self._encode(f"\nassert {name} == '"), self._encode(value),
                self._encode("'\n"))  # fmt: skip


def pose_positions(sample: Sample, target: int, rng: random.Random) -> torch.Tensor:
    """RoPE positions [length] for `sample`'s inputs with one positional skip (PoSE, Zhu et al.
    2023: a short sequence trains the distances of a long one): positions from index `s` on move
    up by `skip`, drawn in [0, target - length], so the last position stays under `target`. `s`
    falls between the end of the first planted line and the first closing assert, so the recall
    spans the skip (anywhere in the sequence where that span is empty)."""
    length = sample.answer.numel()
    positions = torch.arange(length)
    if target <= length:
        return positions
    lo = length + 1 - sample.gap + sample.plant_len
    hi = int(sample.answer.nonzero()[0]) - 16 if bool(sample.answer.any()) else lo
    s = rng.randint(lo, hi) if lo <= hi else rng.randint(1, length - 1)
    positions[s:] += rng.randint(0, target - length)
    return positions
