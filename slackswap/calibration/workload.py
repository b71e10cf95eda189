"""The workload parameters ``calibrate`` can search (``WORKLOAD``): model and problem assumptions,
each with its candidate values (the model's own value first) and their source (docs/calibration.md,
"Workload assumptions").

Unlike the hardware parameters (``parameters.PARAMETERS``, continuous, fitted by least squares),
these are discrete: a value is one stated assumption (the MLM head over the masked positions only,
the budget counting the forward pass only, another batch). ``shared`` parameters take one value
for every target row (what a budget counts is one reading of the paper); the others one value per
model (a batch is per model). Their effect on one row does not depend on another model's values,
which the search uses: at a hardware setting, each model's best values are chosen independently.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.errors import ConfigError, SlackSwapError

#: NVIDIA DeepLearningExamples' BERT pre-training: max_predictions_per_seq 80 of 512 (20 of 128)
NVIDIA_MLM_FRACTION = 80 / 512


@dataclass(frozen=True)
class WorkloadParameter:
    """One searchable workload assumption: ``values(spec)`` its candidates for a model (the spec's
    own value first), ``shared``: one value for all rows (else one per model), ``source``: where
    the candidates come from."""

    name: str
    description: str
    shared: bool
    values: Callable = field(repr=False)
    source: str = ""


def _both(alternative):
    def values(spec, name):
        own = getattr(spec, name)
        return (own,) if own == alternative else (own, alternative)
    return values


def _mlm(spec, name):
    if spec.head != "mlm" or spec.implementation != "fused":
        return (spec.mlm_fraction,)
    return tuple(dict.fromkeys((spec.mlm_fraction, 1.0, NVIDIA_MLM_FRACTION)))


def _batch(spec, name):
    b = spec.batch
    powers = [2 ** k for k in range(0, 16) if max(1, b // 4) <= 2 ** k <= 2 * b]
    return tuple(dict.fromkeys([b] + powers))


def _seq(spec, name):
    if spec.family != "bert" or spec.max_positions < 128:
        return (spec.seq,)
    return tuple(dict.fromkeys((spec.seq, 128)))


def _attention(spec, name):
    return tuple(dict.fromkeys((spec.attention, "flash", "eager")))


WORKLOAD: dict[str, WorkloadParameter] = {p.name: p for p in (
    WorkloadParameter("mlm_fraction", "the MLM head's share of positions", False, _mlm,
                      "1.0: HuggingFace BertForPreTraining (every position); 0.15625: NVIDIA "
                      "DeepLearningExamples BERT pre-training, max_predictions_per_seq 80 of 512 (20 of "
                      "128) gathered before the transform and decoder; MLM heads only"),
    WorkloadParameter("logits_dtype", "dtype of the logits the loss saves", True, _both("fp32"),
                      "activation: Megatron-LM's vocab-parallel cross entropy on 16-bit logits; fp32: "
                      "logits made in fp32 (a loss computed on upcast logits)"),
    WorkloadParameter("loss_workspace", "the loss's fp32 buffer counts", True, _both(False),
                      "true: the fp32 upcast of the logits (Megatron-LM); false: a fused cross entropy "
                      "that overwrites the logits in place"),
    WorkloadParameter("budget_scope", "what the budget's 100% covers", True, _both("forward"),
                      "step: the keep-all peak of the whole step (our reading); forward: the peak of the "
                      "forward pass, what 'activation memory' often means; the published table says neither"),
    WorkloadParameter("budget_logits", "the budget's 100% counts the logits", True, _both(False),
                      "true: the logits, their gradient and the loss's workspace are activations; false: "
                      "left out, as the loss's memory often is; the published table says neither"),
    WorkloadParameter("budget_param_grads", "the budget's 100% adds parameter gradients", True, _both(True),
                      "false: gradients are static memory (ours); true: a peak measured with gradients "
                      "allocated (torch.cuda.max_memory_allocated minus weights and optimizer state)"),
    WorkloadParameter("batch", "micro-batch per GPU", False, _batch,
                      "the published table states no batch: powers of two from a quarter to twice the "
                      "preset's (bert-large 8-64, gpt2-xl 2-16, llama-7b 1-8)"),
    WorkloadParameter("seq", "sequence length", False, _seq,
                      "BERT pre-training: 128 for 90% of the steps, 512 for the rest (Devlin et al. 2019, "
                      "appendix A.2); the other models at their published context"),
    WorkloadParameter("attention", "attention kernel", False, _attention,
                      "flash (FlashAttention) or eager (PyTorch's math attention, saves the s x s "
                      "probabilities); the published table states neither"),
)}


def candidates(name: str, spec) -> tuple:
    """The candidate values of workload parameter ``name`` for ``spec`` (its own value first),
    each one a valid spec (values the spec refuses are left out: e.g. ``mlm_fraction`` of an LM
    head)."""
    if name not in WORKLOAD:
        raise SlackSwapError(f"calibrate.params: unknown parameter {name!r}; known: {', '.join(WORKLOAD)}")
    out = []
    for v in WORKLOAD[name].values(spec, name):
        try:
            spec.replace(**{name: v})
        except ConfigError:
            continue
        out.append(v)
    return tuple(out)


def is_default(name: str, spec, value) -> bool:
    """Whether ``value`` is ``spec``'s own (the model's default; not a stated assumption)."""
    return getattr(spec, name) == value


def assignments(names, spec) -> list[dict]:
    """Every combination of the candidate values of ``names`` for ``spec`` (the own values first)."""
    names = list(names)
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(candidates(n, spec) for n in names))]


def label(values: dict) -> str:
    """``k=v, ...`` of the given values ("defaults" when empty)."""
    return ", ".join(f"{k}={_fmt(v)}" for k, v in values.items()) or "defaults"


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


__all__ = ["NVIDIA_MLM_FRACTION", "WORKLOAD", "WorkloadParameter", "assignments", "candidates",
           "is_default", "label"]
