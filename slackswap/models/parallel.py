"""``Parallel``: how one training step is spread over GPUs (docs/parallel.md).

The execution setting, kept apart from the model (``TransformerSpec``) and the machine
(``Hardware``): data parallelism with a ZeRO stage, tensor parallelism with or without sequence
parallelism, pipeline parallelism with its micro-batch count and the stage to plan, and the
optimizer's state per parameter. The same keys are read from a dict, a TOML table
(``data/parallel/*.toml``) and the CLI's ``--parallel dp=8,zero=3``.

A model's ``batch`` stays the size of one micro-batch (one forward pass): the graph built under a
setting is one micro-batch on one GPU of the planned pipeline stage.

>>> p = Parallel(dp=8, zero=3)
>>> p.dp, p.zero, p.tp, p.pp, p.microbatches
(8, 3, 1, 1, 1)
>>> Parallel(dp=8, zero="shard_grad_op").zero
2
>>> Parallel().is_default
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from ..core.errors import ConfigError, UnknownNameError
from ..core.paths import data_dir, read_document, user_path
from ..core.schema import Schema, parse
from .spec import TransformerSpec

#: The keys of a parallel setting, the same in a dict, a TOML table and on the CLI.
KEYS = ("dp", "zero", "tp", "sp", "pp", "microbatches", "schedule", "stage", "optimizer_bytes")
#: PyTorch FSDP sharding strategies and the ZeRO stage each one is (Zhao et al. 2023).
FSDP_STAGES = {"no_shard": 0, "shard_grad_op": 2, "full_shard": 3}
SCHEDULES = ("1f1b",)
#: Ring collectives over t GPUs: each GPU sends ``factor * (t - 1) / t`` times the full tensor
#: (Thakur et al. 2005; NCCL's "bus bandwidth"): all-reduce = reduce-scatter + all-gather.
COLLECTIVES = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}
#: Bytes per parameter of 16-bit weights and of 16-bit gradients (mixed precision).
WEIGHT_BYTES = 2
GRAD_BYTES = 2
#: Optimizer state per parameter of mixed-precision Adam: fp32 master weights, momentum and
#: variance (Rajbhandari et al. 2020, Sec. 3.1: K = 12).
ADAM_BYTES = 12
#: ZeRO-3 / FSDP full sharding holds the gathered 16-bit parameters of this many units at once:
#: the unit running and the one prefetched (docs/parallel.md, "Static memory").
GATHERED_UNITS = 2

_HELP = {
    "dp": "data-parallel degree N (model replicas; ZeRO shards state over them)",
    "zero": "ZeRO stage 0-3 (or FSDP: no_shard = 0, shard_grad_op = 2, full_shard = 3)",
    "tp": "tensor-parallel degree t (Megatron; divides heads, kv_heads and ffn)",
    "sp": "sequence parallelism (Korthikanti et al. 2022): true | false; needs tp > 1",
    "pp": "pipeline-parallel degree (stages; divides layers)",
    "microbatches": "micro-batches per step (>= pp); default: pp",
    "schedule": "pipeline schedule: " + " | ".join(SCHEDULES),
    "stage": "pipeline stage to plan, 0 .. pp - 1 (default 0, the first: it holds the most)",
    "optimizer_bytes": "optimizer state per parameter in bytes (K; 12 for mixed-precision Adam)",
}

Positive = Annotated[int, Field(ge=1)]


def _zero_stage(value):
    """A ZeRO stage 0-3 or an FSDP sharding strategy's name (``FSDP_STAGES``), as the stage."""
    if isinstance(value, str) and value in FSDP_STAGES:
        return FSDP_STAGES[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return value
    raise PydanticCustomError("zero", "expected a ZeRO stage 0, 1, 2 or 3, or one of {names}",
                              {"names": ", ".join(repr(k) for k in FSDP_STAGES)})


class ParallelSchema(Schema):
    """The declared types and ranges of every key, and the checks between keys."""

    dp: Positive = 1
    zero: Annotated[Any, BeforeValidator(_zero_stage)] = 0
    tp: Positive = 1
    sp: bool = False
    pp: Positive = 1
    microbatches: Positive | None = None
    schedule: Literal[SCHEDULES] = "1f1b"
    stage: Annotated[int, Field(ge=0)] = 0
    optimizer_bytes: Annotated[int, Field(ge=0)] = ADAM_BYTES

    @model_validator(mode="after")
    def _consistent(self):
        if self.sp and self.tp == 1:
            raise ValueError("sp: sequence parallelism needs tp > 1; got sp = true with tp = 1")
        if self.zero and self.dp == 1:
            raise ValueError(f"zero: stage {self.zero} shards over dp; needs dp > 1, got dp = 1")
        mb = self.pp if self.microbatches is None else self.microbatches
        if mb < self.pp:
            raise ValueError(f"microbatches: must be >= pp ({self.pp}) for the 1F1B schedule; got {mb}")
        if self.stage >= self.pp:
            raise ValueError(f"stage: must be in 0 .. pp - 1 = {self.pp - 1}; got {self.stage}")
        return self


class ParallelFile(ParallelSchema):
    """A file in ``data/parallel/``: the keys, a name and description, and ``[sources]``."""

    name: str | None = None
    description: str = ""
    sources: dict[str, Annotated[str, Field(min_length=1)]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sourced(self):
        given = [k for k in KEYS if k in self.model_fields_set]
        missing = [k for k in given if k not in self.sources]
        if missing:
            raise ValueError(f"sources: every key set needs a source; missing {', '.join(missing)}")
        return self


@dataclass(frozen=True)
class Parallel:
    """A parallel setting (validated on construction: ``ConfigError`` naming the key).

    ``zero`` is stored as the stage number; ``microbatches`` defaults to ``pp``."""

    dp: int = 1
    zero: int = 0
    tp: int = 1
    sp: bool = False
    pp: int = 1
    microbatches: int | None = None
    schedule: str = "1f1b"
    stage: int = 0
    optimizer_bytes: int = ADAM_BYTES
    name: str = dataclasses.field(default="", compare=False)

    def __post_init__(self):
        doc = parse(ParallelSchema, {k: getattr(self, k) for k in KEYS}, "parallel")
        object.__setattr__(self, "zero", doc.zero)
        if self.microbatches is None:
            object.__setattr__(self, "microbatches", self.pp)

    @classmethod
    def help(cls) -> dict[str, str]:
        return dict(_HELP)

    @property
    def is_default(self) -> bool:
        """One GPU: no data, tensor or pipeline parallelism, Adam's 12 bytes of state."""
        return self.as_dict() == Parallel().as_dict()

    @property
    def gpus(self) -> int:
        """GPUs of the whole job: ``dp * tp * pp``."""
        return self.dp * self.tp * self.pp

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in KEYS}

    def replace(self, **changes) -> Parallel:
        bad = sorted(set(changes) - set(KEYS))
        if bad:
            raise ConfigError(f"parallel: {bad[0]}: unknown key; allowed: {', '.join(KEYS)}")
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        return (f"dp={self.dp} zero={self.zero} tp={self.tp} sp={str(self.sp).lower()} pp={self.pp} "
                f"microbatches={self.microbatches} stage={self.stage}")

    # ---- the model under this setting ----
    def check(self, spec: TransformerSpec) -> None:
        """Refuse a setting the model cannot take, naming the key: tp must divide heads, kv_heads
        and ffn; sp needs seq divisible by tp; pp must divide layers."""
        t = self.tp
        if t > 1:
            if spec.heads % t or spec.kv_heads % t:
                raise ConfigError(f"parallel: tp: must divide heads ({spec.heads}) and kv_heads "
                                  f"({spec.kv_heads}) of {spec.name}; got {t}")
            if spec.ffn % t:
                raise ConfigError(f"parallel: tp: must divide ffn ({spec.ffn}) of {spec.name}; got {t}")
            if spec.tensor_parallel not in (1, t):
                raise ConfigError(f"parallel: tp: the model {spec.name} sets tensor_parallel = "
                                  f"{spec.tensor_parallel}; give one of the two; got tp = {t}")
        if self.sp and spec.seq % t:
            raise ConfigError(f"parallel: sp: seq ({spec.seq}) of {spec.name} must be divisible by "
                              f"tp ({t}) to split the sequence; got tp = {t}")
        if spec.layers % self.pp:
            raise ConfigError(f"parallel: pp: must divide layers ({spec.layers}) of {spec.name}; "
                              f"got {self.pp}")

    def apply(self, spec: TransformerSpec) -> TransformerSpec:
        """``spec`` checked (``check``), with ``tensor_parallel`` set to ``tp`` when tp > 1."""
        self.check(spec)
        return spec.replace(tensor_parallel=self.tp) if self.tp > 1 else spec

    def stage_layers(self, spec: TransformerSpec) -> range:
        """The blocks the planned stage holds: ``layers / pp`` consecutive ones."""
        n = spec.layers // self.pp
        return range(self.stage * n, (self.stage + 1) * n)

    @property
    def first_stage(self) -> bool:
        return self.stage == 0

    @property
    def last_stage(self) -> bool:
        return self.stage == self.pp - 1

    def stage_params(self, spec: TransformerSpec) -> tuple[int, int]:
        """``(parameters of the planned stage on one GPU, largest unit's parameters)``: tensor-
        parallel shards rounded up as ``TransformerSpec.params_per_gpu`` does. The first stage
        holds the embeddings, the last the final norm, pooler and head (and, with tied embeddings
        and pp > 1, its own copy of the word embeddings, as Megatron-LM keeps it); blocks are
        split evenly. A unit (for ZeRO-3's gathers) is one block, the embeddings or the head."""
        t = spec.tensor_parallel if self.tp == 1 else self.tp
        groups = spec.param_groups()
        per_gpu = {k: -(-sh // t) + rep for k, (sh, rep) in groups.items()}
        sh, rep = groups["blocks"]
        per_block = -(-sh // (spec.layers * t)) + rep // spec.layers
        blocks = per_gpu["blocks"] if self.pp == 1 else per_block * (spec.layers // self.pp)
        units = [per_block]
        total = blocks
        if self.first_stage:
            total += per_gpu["embeddings"]
            units.append(per_gpu["embeddings"])
        if self.last_stage:
            head = per_gpu["final_norm"] + per_gpu["pooler"] + per_gpu["head"]
            if self.pp > 1 and spec.tied_embeddings:
                head += -(-groups["embeddings"][0] // t)
            total += head
            units.append(head)
        return total, max(units)

    def static_breakdown(self, spec: TransformerSpec) -> dict[str, int]:
        """Bytes per GPU of ``weights``, ``gradients``, ``optimizer`` state and ZeRO-3's
        ``gathered`` parameters for the planned stage (``zero_static_bytes`` of its parameters;
        docs/parallel.md)."""
        psi, unit = self.stage_params(spec)
        return zero_static_bytes(psi, self.dp, self.zero, self.optimizer_bytes,
                                 unit if self.zero == 3 else 0)

    def static_bytes(self, spec: TransformerSpec) -> int:
        """Static memory per GPU: the sum of ``static_breakdown``."""
        return sum(self.static_breakdown(spec).values())


def zero_static_bytes(psi: int, dp: int, zero: int, optimizer_bytes: int = ADAM_BYTES,
                      unit: int = 0) -> dict[str, int]:
    """Static memory per GPU of Ψ = ``psi`` parameters data-parallel over N = ``dp`` GPUs at ZeRO
    stage ``zero`` (Rajbhandari et al. 2020, Sec. 5 and Fig. 1), K = ``optimizer_bytes``:

    * stage 0: ``(2 + 2 + K)Ψ``; stage 1: ``(2 + 2)Ψ + KΨ/N``; stage 2: ``2Ψ + (2 + K)Ψ/N``;
      stage 3: ``(2 + 2 + K)Ψ/N``, plus ``gathered``: the 16-bit parameters of
      ``GATHERED_UNITS`` units of ``unit`` parameters, all-gathered at once (0 unless stage 3).

    Each shard is rounded up to whole bytes. The ZeRO paper's example (Ψ = 7.5 B, N = 64, K = 12):

    >>> [sum(zero_static_bytes(7_500_000_000, 64, z).values()) / 1e9 for z in range(4)]
    [120.0, 31.40625, 16.640625, 1.875]
    """
    def shard(nbytes: int, stage: int) -> int:
        return -(-nbytes // dp) if zero >= stage else nbytes

    return {"weights": shard(WEIGHT_BYTES * psi, 3), "gradients": shard(GRAD_BYTES * psi, 2),
            "optimizer": shard(optimizer_bytes * psi, 1),
            "gathered": GATHERED_UNITS * WEIGHT_BYTES * unit if zero == 3 else 0}


def as_parallel(value, where: str = "parallel") -> Parallel | None:
    """A ``Parallel`` from None, a ``Parallel``, a dict of keys, a ``data/parallel`` preset name or
    a ``.toml`` path; ``ConfigError`` names the key."""
    if value is None or isinstance(value, Parallel):
        return value
    if isinstance(value, dict):
        bad = [k for k in value if k not in KEYS]
        if bad:
            raise ConfigError(f"{where}: {bad[0]}: unknown key; allowed: {', '.join(KEYS)}")
        doc = parse(ParallelSchema, value, where)
        return Parallel(**{k: getattr(doc, k) for k in KEYS})
    if isinstance(value, (str, Path)):
        return load(value)
    raise ConfigError(f"{where}: expected a dict of {', '.join(KEYS)}, a Parallel, a preset name "
                      f"({', '.join(available())}) or a .toml path; got {value!r}")


def parse_text(text: str, where: str = "--parallel") -> Parallel:
    """The CLI's ``--parallel``: a preset name, a ``.toml`` path, or ``KEY=VALUE`` pairs joined
    by commas with the same keys (``dp=8,zero=3``; ``true``/``false`` for ``sp``).

    >>> parse_text("dp=8,zero=full_shard,tp=2,sp=true").describe()
    'dp=8 zero=3 tp=2 sp=true pp=1 microbatches=1 stage=0'
    """
    if "=" not in text:
        return load(text)
    doc: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, value = (x.strip() for x in part.partition("="))
        if not sep or not key:
            raise ConfigError(f"{where}: expected KEY=VALUE pairs joined by commas ({', '.join(KEYS)}); "
                              f"got {part.strip()!r}")
        if key in doc:
            raise ConfigError(f"{where}: {key}: given twice")
        low = value.lower()
        doc[key] = (low == "true") if low in ("true", "false") else \
            int(value) if value.lstrip("-").isdigit() else value
    return as_parallel(doc, where)


# ---------------------------------------------------------------- files
def parallel_dir() -> Path:
    return data_dir() / "parallel"


def available() -> list[str]:
    """Preset names (the stems of ``data/parallel/*.toml``)."""
    return sorted(p.stem for p in parallel_dir().glob("*.toml"))


def load(name: str | Path) -> Parallel:
    """A preset by name or a ``.toml`` path in the same format (``ParallelFile``)."""
    if str(name).endswith(".toml"):
        path = user_path(name)
    else:
        if str(name) not in available():
            raise UnknownNameError("parallel setting", str(name), available())
        path = parallel_dir() / f"{name}.toml"
    path, raw = read_document(path, "toml", "parallel file", ConfigError)
    doc = parse(ParallelFile, raw, path.name)
    return Parallel(**{k: getattr(doc, k) for k in KEYS}, name=doc.name or path.stem)
