"""Foreign metric names (CSV columns, TensorBoard tags, JSON keys) → the stethoscope vocabulary.

Known spellings map onto `stethoscope.records` names; names with a unit or a quantity in their words
(`step_ms`, `mem_rss_gb`, `tok/s`, `memory/max_reserved(GiB)`) go through `stethoscope.detect.names`,
which also gives the factor to our unit (`metric`). `train_x`/`x/train` become `train/x`,
`val_x`/`eval_x`/`valid_x`/`x/val` become `eval/x`, `test_x`/`predict_x` become `test/x`; anything else keeps
its own name (surrounding blanks trimmed, inner blanks turned into `_`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache

from stethoscope.detect.names import Resolved, recognize
from stethoscope.logtext.table import Layout
from stethoscope.records import (
    EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, PARAM_NORM, SAMPLES_PER_S, STEP_TIME, TFLOPS, TOKENS_PER_S,
)

EPOCH = "train/epoch"

# Keys are normalized: lower case, blanks and dashes as underscores.
_ALIASES = {
    **dict.fromkeys(("loss", "train/loss", "train_loss", "training_loss", "loss/train", "lm_loss", "train/lm_loss",
                     "reduced_train_loss", "trl", "learn", "epoch_loss", "objective", "train/objective", "loss_value",
                     "episode_loss"),
                    LOSS),
    # CatBoost's `learn`, GluonTS's `epoch_loss` (the epoch's mean train loss; an RL loop's `episode_loss`, the
    # episode's), the objective minimised (its loss),
    # the loss's value (`loss_value: 2.31`)
    **dict.fromkeys(("eval/loss", "eval_loss", "val/loss", "val_loss", "valid/loss", "valid_loss",
                     "validation/loss", "validation_loss", "loss/val", "loss/valid", "loss/validation",
                     "loss/eval", "val_loss_epoch", "lm_loss_validation", "tel"), EVAL_LOSS),
    **dict.fromkeys(("lr", "learning_rate", "train/learning_rate", "train/lr", "opt/lr", "lr/train"), LR),
    **dict.fromkeys(("grad_norm", "gradient_norm", "grad/norm", "train/grad_norm", "gnorm", "train/gnorm",
                     "grad_norm/total"), GRAD_NORM),
    **dict.fromkeys(("loss_scale", "amp/loss_scale", "train/loss_scale", "scaler/scale", "grad_scale"), LOSS_SCALE),
    **dict.fromkeys(("iteration_time", "step_time_s", "perf/step_time_s", "train/step_time_s"), STEP_TIME),
    **dict.fromkeys(("tokens_per_s", "tokens_per_sec", "tokens_per_second", "tok/s", "perf/tokens_per_s"),
                    TOKENS_PER_S),
    **dict.fromkeys(("samples_per_s", "samples_per_sec", "samples_per_second", "samples/sec",
                     "perf/samples_per_s"), SAMPLES_PER_S),
    **dict.fromkeys(("tflops", "perf/tflops"), TFLOPS),
    **dict.fromkeys(("params_norm", "param_norm", "param/norm"), PARAM_NORM),
    **dict.fromkeys(("epoch", "train/epoch"), EPOCH),
    "lm_loss_validation_ppl": "eval/ppl",
    "consumed_samples": "train/consumed_samples",
    "batch_size": "train/batch_size",
    "num_zeros": "grad/num_zeros",
}
# Units spelled out where the source left them implicit (HF: eval_runtime, eval_samples_per_second …).
_UNITS = {"runtime": "runtime_s", "samples_per_second": "samples_per_s", "steps_per_second": "steps_per_s"}

_NAMESPACES = {"train": "train", "training": "train", "trn": "train", "tr": "train",
               "val": "eval", "valid": "eval", "validation": "eval",
               "eval": "eval", "evaluation": "eval", "test": "test", "predict": "test"}
_PREFIX = re.compile(r"^(train|training|trn|tr|val|valid|validation|eval|evaluation|test|predict)[_/\-](.+)$",
                     re.IGNORECASE)  # XGBoost: `train-logloss`, `eval-logloss`; `trn_loss`, `tr_loss` (abbreviated)
# The mean squared error printed as the train split's metric (`train_mse`) is a regression's objective: its loss.
_TRAIN_MSE = re.compile(r"^(?:train|training|trn|tr)_(?:mse|mean_squared_error)$")
_SUFFIX = re.compile(r"^([^/]+)/(train|training|val|valid|validation|eval|evaluation|test)$", re.IGNORECASE)
_SET_WORD = re.compile(r"^(?:set|split|dataset|data)_", re.IGNORECASE)  # `test_set_loss`: the split's name, not the metric's
# A data set's metric named with its possessive (LightGBM: `training's binary_logloss`, `valid_1's l2`): the set's words
# say the split (`valid_1`: the second validation set), its numbering none.
_POSSESSIVE = re.compile(r"^([A-Za-z]+)(?:[_ ]\d+)?'s[\s_]+(\S.*)$")
# The log loss (XGBoost's `logloss`, `mlogloss`; LightGBM's `binary_logloss`, `multi_logloss`) is the cross-entropy a
# classifier is trained on: a loss by its name, as the loss of any split it is printed for.
_LOG_LOSS = re.compile(r"^(?:[a-z]+_)?m?log_?loss$", re.IGNORECASE)
# Lightning's LearningRateMonitor: lr-AdamW, lr-AdamW/pg2, lr-SGD-1 … (not lr_decay, lr-Adam-momentum)
_LR_MONITOR = re.compile(r"^lr-[A-Za-z]\w*(?:-\d+)?(?:/pg(\d+))?$")
# Ultralytics' LR of each parameter group, numbered from 0: `lr/pg0` (YOLOv8 and later), `x/lr0` (YOLOv5, YOLOv7)
_LR_GROUPS = re.compile(r"^(?:lr/pg|x/lr)(\d)$")
# Words run together (camel case) part where a lower-case run of two or more letters meets a capital (`gradNorm`,
# `lossG`, `valAUROC`, `meanIoU`) and before a capitalised word (`mAcc`, `top1Acc`, `StepTimeMs`). A lone lower-case
# letter before capitals heads an acronym, one word with it (`mAP` map, `mIoU` miou, `nDCG`, `tFLOPs`), as a lone
# lower-case letter inside one (`IoU`): the spelling a person reads, which the quality metrics' names expect.
CAMEL = re.compile(r"(?<=[a-z]{2})(?=[A-Z])|(?<=[a-z0-9])(?=[A-Z][a-z]{2})")
# Words that end no metric's name: a number after them is their object (`Start inference on 6 batches`, `finished in
# 0.01 seconds`, `km/h for 3 hours`), so the words before it are prose, not its name.
FUNCTION_WORDS = frozenset("an the and or but of in on at to for by as from with into than is are was were be has "
                            "have had".split())
_PERSONAL = frozenset("we they she he you our their".split())  # `We know they won 80 %`: a sentence's subject
_COUNTERS = frozenset("epoch epochs step steps iter iteration batch round".split())
# mmengine's `Epoch(train) [5][20/21]`, `Epoch(val) [10][13/13]`: a counter labelled with its loop, the record's head
# (a metric labelled so is the loop's metric: `Loss(train): 3.11`)
_LOOP_LABEL = re.compile(rf"^(?:{'|'.join(_COUNTERS)})\((?:train|val|test|eval)\)$", re.IGNORECASE)


def normalize(raw: str) -> str:
    """The lookup form of a name: trimmed, lower case, blanks and dashes as underscores."""
    return "_".join(raw.strip().lower().replace("-", "_").split())


def metric_name(raw: str, namespace: str | None = None) -> str:
    """Our name for the foreign metric `raw`; `namespace` ("train"/"eval"/"test") applies to bare names."""
    return metric(raw, namespace).name


@lru_cache(maxsize=4096)  # importers ask per column, the text importer per key and line
def metric(raw: str, namespace: str | None = None) -> Resolved:
    """Our name for the foreign metric `raw` and the factor that converts its values to our unit."""
    key = normalize(raw)
    if namespace and f"{namespace}/{key}" in _ALIASES:
        return Resolved(_ALIASES[f"{namespace}/{key}"])
    if key in _ALIASES:
        if namespace in ("eval", "test") and _ALIASES[key] == LOSS and not _PREFIX.match(key):
            return Resolved(_ALIASES.get(f"{namespace}/loss", f"{namespace}/loss"))  # an eval line's `epoch_loss`
        return Resolved(_ALIASES[key])
    if _TRAIN_MSE.match(key):
        return Resolved(LOSS)
    lr = _LR_MONITOR.match(raw.strip())
    if lr:
        return Resolved(lr_group(int(lr.group(1) or 1) - 1))
    lr = _LR_GROUPS.match(key)
    if lr:
        return Resolved(lr_group(int(lr.group(1))))
    owned = _POSSESSIVE.match(raw.strip())
    if owned and owned[1].lower() in _NAMESPACES:
        return metric(f"{owned[1]}_{owned[2]}", namespace)
    clean = "_".join(raw.split())
    found = recognize(raw)
    if found is not None:
        return _in_namespace(found, namespace) if namespace and "/" not in clean else found
    return Resolved(_fallback(clean, namespace))


def names_a_metric(key: str) -> bool:
    """Whether a console key as written can be a metric's name: not words of a sentence (ending in a function word,
    `A car travels at`; ending a sentence, `3 hours.`; a personal pronoun, `we know they won`; over 6 words),
    nor a loop's counter with its label (`Epoch(train)`) or after a function word (`Test on Epoch 5`)."""
    words = key.lower().split()
    if not words or _LOOP_LABEL.match(key.strip()) or len(words) > 6 or words[-1] in FUNCTION_WORDS:
        return False
    if len(words) == 1:  # a capitalised word with a stop is an abbreviation (Marian's `Ep. 1 : Up. 500 : Sen. 64,000`)
        return not words[0].endswith(".") or key.strip()[0].isupper()
    last, before = words[-1], words[-2]
    return not (last == "a" or last.endswith(".") or not _PERSONAL.isdisjoint(words) or (
        last in _COUNTERS and before in FUNCTION_WORDS))


def known(raw: str) -> bool:
    """Does `raw` name a metric we know (an alias or a spelling the resolver recognises), not just a name
    we would keep as it is?"""
    return normalize(raw) in _ALIASES or recognize(raw) is not None


def _in_namespace(found: Resolved, namespace: str) -> Resolved:
    head, leaf = found.name.split("/", 1)
    if namespace == "train" or head not in ("train", "perf", "memory"):
        return found
    return Resolved(f"{namespace}/{leaf}", found.scale)


def _fallback(clean: str, namespace: str | None) -> str:
    split = _PREFIX.match(clean) or _SUFFIX.match(clean)
    if split:
        ns, rest = (split.group(1), split.group(2)) if split.re is _PREFIX else (split.group(2), split.group(1))
        named = _SET_WORD.sub("", rest) if split.re is _PREFIX else rest
        if named != rest and named:  # `Test set: Average loss` (PyTorch's MNIST example): the split's own word;
            rest = "loss" if recognize(named) == Resolved(LOSS) else named  # its loss, however it is named
        elif _is_loss(rest):  # a split's train-loss spelling is its loss (`eval-logloss`, `validation_epoch_loss`)
            rest = "loss"
        name = f"{_NAMESPACES[ns.lower()]}/{_UNITS.get(rest.lower(), rest)}"
        return _ALIASES.get(normalize(name), name)
    if _LOG_LOSS.match(clean):
        return _ALIASES.get(f"{namespace}/loss", f"{namespace}/loss") if namespace else LOSS
    if namespace and "/" not in clean:
        return f"{namespace}/{clean}"
    return clean


def _is_loss(rest: str) -> bool:
    """Whether a name with its split taken off spells the loss (`logloss`, `epoch_loss`, `learn`)."""
    return metric(rest).name == LOSS  # (a shorter name: `training's train-logloss` -> `train-logloss` -> the loss)


def lr_group(index: int) -> str:
    """The LR series of parameter group `index` (0 is the plain `opt/lr`)."""
    return LR if index <= 0 else f"{LR}/group{index}"


class FileNames:
    """The names of one file's columns (or tags, or keys), each resolved once.

    Two spellings of one of our names in different units (`step_time` and `step_ms`) cannot share a
    series: the later one keeps its own name. `scales` holds the factors that are not 1.
    """

    def __init__(self) -> None:
        self._seen: dict[str, Resolved] = {}
        self._units: dict[str, float] = {}
        self.scales: dict[str, float] = {}

    def __call__(self, raw: str, own: Callable[[str], str | None] | None = None) -> Resolved:
        """`raw` resolved; `own(raw)`, when given and not None, is the importer's own name for it."""
        found = self._seen.get(raw)
        if found is None:
            known = own(raw) if own else None
            found = Resolved(known) if known else metric(raw)
            if self._units.setdefault(found.name, found.scale) != found.scale:
                found = Resolved("_".join(raw.split()))
            if found.scale != 1.0:
                self.scales[found.name] = found.scale
            self._seen[raw] = found
        return found


def scaled_row(values: Mapping[str, object], scales: Mapping[str, float]) -> tuple[Layout, tuple[object, ...]]:
    """A PointTable row for {name: raw value}: the layout carries the factors when a name has one."""
    names = tuple(values)
    factors = tuple(scales.get(n, 1.0) for n in names) if scales and not scales.keys().isdisjoint(names) else None
    return Layout(names, factors), tuple(values.values())


_WORDS = re.compile(r"[a-z]+")
_SCOPES = {"train/": {"train", "training", "trn"}, "eval/": {"val", "valid", "validation", "eval", "evaluation", "test",
                                                             "dev"}}
_OBJECTIVE = {"loss", "total", "objective"}  # words of the loss a trainer optimises (`train/total_loss`)


def distance(raw: str, name: str) -> int:
    """How many words `raw` has beyond `name`'s own, its scope's (`val`, `train`) and the objective's:
    `val/loss` 0, `val/train_loss` 1 (a train word in an eval name), `train/ce_loss` 1, `train/total_loss` 0."""
    scope = next((words for prefix, words in _SCOPES.items() if name.startswith(prefix)), set())
    own = set(_WORDS.findall(name.lower())) | scope | _OBJECTIVE
    return sum(1 for w in _WORDS.findall(raw.lower()) if w not in own)


def closest(keys: list[str], name: str) -> set[str]:
    """The keys naming `name` in the closest spelling (`distance`): the others are its parts or kin."""
    far = {k: distance(k, name) for k in keys}
    best = min(far.values())
    return {k for k, d in far.items() if d == best}


def rivals(named: dict[str, str], demoted: set[str] | None = None) -> dict[str, str]:
    """{raw key: our name} where no two keys share a name: two keys of one row or header that resolve to one
    series (`val/loss` and `val/train_loss` to the eval loss; `train/total_loss` and `train/ce_loss` to the
    train loss) would overwrite each other's values. The closest spelling (`distance`, then the first) keeps
    the name; the others keep their own (`val/train_loss`), and stay demoted in later rows (`demoted`)."""
    if demoted:
        named = {k: ("_".join(k.split()) if k in demoted else n) for k, n in named.items()}
    if len(set(named.values())) == len(named):
        return named
    by_name: dict[str, list[str]] = {}
    for key, name in named.items():
        by_name.setdefault(name, []).append(key)
    out = dict(named)
    for name, keys in by_name.items():
        if len(keys) > 1:
            best = min(keys, key=lambda k: distance(k, name))
            for key in keys:
                if key != best:
                    out[key] = "_".join(key.split())
                    if demoted is not None:
                        demoted.add(key)
    return out
