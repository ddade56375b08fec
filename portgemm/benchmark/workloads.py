"""Workloads: lists of cases, each a named batch of (M, N, K) shapes.

- the grid (12 size ranges x batches 8/64/256/1024): M, N uniform in [16, MaxMN], K in
  [16, MaxK], MaxMN in {128, 256, 512, 1024}, MaxK in {128, 256, 512}, seeded;
- one random case (--batch/--max-mn/--max-k);
- zhang2025 Table 6's Inception layers;
- a shapes file: CSV (M,N,K per row, optional header) or JSON ([[M, N, K], ...] or
  [{"M":..,"N":..,"K":..}, ...]); a bad file raises WorkloadError naming the row.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PortgemmError

MIN_SIZE = 16
MAX_MN = (128, 256, 512, 1024)
MAX_K = (128, 256, 512)
BATCHES = (8, 64, 256, 1024)

# zhang2025 Table 6: GEMM sizes (M x N x K) of each Inception module.
INCEPTION = {
    "Inception-1": [(784, 96, 192), (784, 64, 192), (784, 32, 192), (784, 16, 192)],
    "Inception-2": [(784, 64, 192), (784, 32, 192), (784, 128, 192)],
    "Inception-3": [(196, 192, 192), (196, 16, 192), (196, 96, 192), (196, 64, 192)],
    "Inception-4": [(196, 64, 192), (196, 24, 192), (196, 160, 192)],
    "Inception-5": [(196, 64, 192), (196, 128, 192), (196, 24, 192)],
    "Inception-6": [(196, 112, 192), (196, 144, 192), (196, 32, 192), (196, 64, 192)],
    "Inception-7": [(196, 256, 192), (196, 160, 192), (196, 128, 192)],
    "Inception-8": [(49, 160, 192), (49, 128, 192), (49, 256, 192), (49, 160, 192),
                    (49, 32, 192)],
    "Inception-9": [(49, 192, 192), (49, 128, 192), (49, 384, 192), (49, 192, 192),
                    (49, 48, 192)],
}


class WorkloadError(PortgemmError, ValueError):
    """A workload option or shapes file that cannot be used."""


@dataclass(frozen=True)
class Case:
    name: str             # e.g. "256/128 b64", "Inception-3", "shapes.csv"
    shapes: np.ndarray    # (batch, 3) int64: M, N, K
    max_mn: int | None = None
    max_k: int | None = None

    @property
    def batch(self) -> int:
        return int(self.shapes.shape[0])

    @property
    def range(self) -> str:
        return f"{self.max_mn}/{self.max_k}" if self.max_mn else self.name

    @property
    def flops(self) -> float:
        s = self.shapes.astype(np.float64)
        return float(2 * (s[:, 0] * s[:, 1] * s[:, 2]).sum())


def random_shapes(rng, batch, max_mn, max_k) -> np.ndarray:
    lo_mn, lo_k = min(MIN_SIZE, max_mn), min(MIN_SIZE, max_k)
    return np.stack([rng.integers(lo_mn, max_mn + 1, batch), rng.integers(lo_mn, max_mn + 1, batch),
                     rng.integers(lo_k, max_k + 1, batch)], axis=1).astype(np.int64)


def random_case(batch, max_mn, max_k, seed=0) -> Case:
    rng = np.random.default_rng(seed)
    return Case(f"{max_mn}/{max_k} b{batch}", random_shapes(rng, batch, max_mn, max_k),
                max_mn, max_k)


RANGES = tuple((mn, k) for mn in MAX_MN for k in MAX_K)
QUICK_RANGES = ((128, 128), (256, 512), (512, 256), (1024, 512))
QUICK_BATCHES = (8, 256, 1024)


def grid_cases(seed=0, ranges=RANGES, batches=BATCHES) -> list[Case]:
    """Every (MaxMN, MaxK) range x batch, each case from its own seeded generator so a
    subset (--quick, --ranges, --batches) draws the same shapes as the full grid."""
    return [random_case(b, mn, k, seed=(seed, mn, k, b)) for mn, k in ranges for b in batches]


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """"128/128,1024/512" -> [(128, 128), (1024, 512)] (MaxMN/MaxK pairs)."""
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        parts = item.split("/")
        try:
            mn, k = (int(p) for p in parts)
        except ValueError:
            raise WorkloadError(f"range {item!r}: expected MaxMN/MaxK, e.g. 256/128") from None
        if mn < 1 or k < 1:
            raise WorkloadError(f"range {item!r}: sizes must be positive")
        out.append((mn, k))
    if not out:
        raise WorkloadError("no range given")
    return out


def inception_cases() -> list[Case]:
    return [Case(name, np.array(s, np.int64)) for name, s in INCEPTION.items()]


def read_shapes_file(path) -> Case:
    """One case from a CSV or JSON file of M, N, K rows (sizes >= 0, at least one row)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise WorkloadError(f"{path}: cannot read ({e.strerror or e})") from e
    rows = _json_rows(text, path) if p.suffix.lower() == ".json" else _csv_rows(text, path)
    if not rows:
        raise WorkloadError(f"{path}: no M,N,K rows")
    return Case(p.name, np.array(rows, np.int64))


def _size(value, where) -> int:
    try:
        v = int(str(value).strip())
    except ValueError:
        raise WorkloadError(f"{where}: {value!r} is not an integer size") from None
    if v < 0:
        raise WorkloadError(f"{where}: size {v} is negative")
    return v


def _csv_rows(text, path) -> list[tuple[int, int, int]]:
    rows = []
    for n, row in enumerate(csv.reader(text.splitlines()), 1):
        cells = [c for c in row if c.strip()]
        if not cells or cells[0].lstrip().startswith("#"):
            continue
        if n == 1 and [c.strip().upper() for c in cells] == ["M", "N", "K"]:
            continue  # header
        if len(cells) != 3:
            raise WorkloadError(f"{path} line {n}: expected 3 values M,N,K, got {len(cells)}")
        rows.append(tuple(_size(c, f"{path} line {n}") for c in cells))
    return rows


def _json_rows(text, path) -> list[tuple[int, int, int]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if isinstance(data, dict) and "shapes" in data:
        data = data["shapes"]
    if not isinstance(data, list):
        raise WorkloadError(f"{path}: expected a list of [M, N, K] rows")
    rows = []
    for i, r in enumerate(data):
        where = f"{path} row {i}"
        if isinstance(r, dict):
            try:
                r = [r["M"], r["N"], r["K"]]
            except KeyError as e:
                raise WorkloadError(f"{where}: missing key {e.args[0]!r}") from None
        if not isinstance(r, list) or len(r) != 3:
            raise WorkloadError(f"{where}: expected [M, N, K]")
        if any(isinstance(v, (bool, float)) for v in r):
            raise WorkloadError(f"{where}: sizes must be integers, got {r}")
        rows.append(tuple(_size(v, where) for v in r))
    return rows


# Mixture-of-experts layers (one per expert count): (model, experts, hidden, expert ffn
# width, experts per token), from the models' published configurations.
MOE_LAYERS = (
    ("Mixtral-8x7B", 8, 4096, 14336, 2),
    ("Phi-3.5-MoE", 16, 4096, 6400, 2),
    ("Granite-3.0-1B-A400M", 32, 1024, 512, 8),
    ("OLMoE-1B-7B", 64, 2048, 1024, 8),
    ("Qwen3-30B-A3B", 128, 2048, 768, 8),
)
MOE_TOKENS = 4096
ROUTING_TEXT = {
    "uniform": "experts drawn uniformly at random (rows per expert binomial)",
    "zipf": "experts drawn with popularity proportional to 1/rank (Zipf, s = 1), "
            "without replacement",
}


def expert_popularity(experts: int, routing: str) -> np.ndarray | None:
    """The router's preference over experts (None: uniform)."""
    if routing == "uniform":
        return None
    if routing == "zipf":
        w = 1.0 / np.arange(1, experts + 1)
        return w / w.sum()
    raise WorkloadError(f"routing {routing!r}: known {', '.join(ROUTING_TEXT)}")


def moe_counts(rng, tokens: int, experts: int, top_k: int, popularity=None) -> np.ndarray:
    """Rows per expert when each of ``tokens`` tokens goes to ``top_k`` distinct experts:
    uniformly at random (popularity None: each count binomial(tokens, top_k / experts)),
    or drawn without replacement with weights ``popularity`` (the Gumbel top-k draw).
    The counts sum to tokens * top_k."""
    if not 1 <= top_k <= experts:
        raise WorkloadError(f"top_k {top_k} must be in [1, experts={experts}]")
    u = rng.random((tokens, experts))
    if popularity is None:
        picks = np.argsort(u, axis=1)[:, :top_k]
    else:   # the top_k largest of log(weight) + Gumbel noise
        keys = np.log(popularity) - np.log(-np.log(np.maximum(u, 1e-300)))
        picks = np.argsort(-keys, axis=1)[:, :top_k]
    return np.bincount(picks.ravel(), minlength=experts).astype(np.int64)


def moe_cases(tokens=MOE_TOKENS, seed=0, experts=None, layers=MOE_LAYERS,
              routing="uniform") -> list[Case]:
    """Two ragged-M cases per layer: the up projection (M_e x ffn x hidden) and the down
    projection (M_e x hidden x ffn), M_e the rows routed to expert e (moe_counts);
    ``experts`` keeps only layers of those expert counts."""
    out = []
    for model, e, hidden, ffn, top_k in layers:
        if experts is not None and e not in experts:
            continue
        m = moe_counts(np.random.default_rng((seed, e, tokens)), tokens, e, top_k,
                       expert_popularity(e, routing))
        for proj, n, k in (("up", ffn, hidden), ("down", hidden, ffn)):
            shapes = np.stack([m, np.full(e, n), np.full(e, k)], axis=1).astype(np.int64)
            out.append(Case(f"{model} {proj} E{e}", shapes))
    return out
