"""Counters that count within an epoch (`Epoch 2 | step 50/1563`, `Epoch(train) [2][50/1563]`): the global
step adds the earlier epochs' totals. A counter with a total and its epoch before it is within epochs when
it goes back as the epoch advances; one that does not go back is global (Composer's `[epoch=1][batch=N/T]`).
Lines read at once carry no epoch, so a run of them is taken as read only while no epoch has restarted the
counter and the counter does not fall back to within one logging interval of zero."""

from __future__ import annotations

import re
from functools import reduce
from math import gcd
from typing import Any

from stethoscope.detect.names import CROSS_ENTROPY
from stethoscope.records import LOSS

# `... 11:00:07.000001: Epoch 3`, st-gcn's `[03.24.23|09:56:11] Training epoch: 0` / `Eval epoch: 4`, `- INFO - Epoch 1:`
_EPOCH_ALONE = re.compile(r"(?:^|[:\]|>\-])\s*(?i:(?P<phase>train(?:ing)?|(?P<eval>eval(?:uation)?|val(?:idation)?|"
                          r"test(?:ing)?))\s+)?(?i:epoch)\s*:?\s*(\d+)(?:\s+of\s+\d+)?\s*:?\s*$")  # (`EPOCH 8 of 30`)
BATCH_OF = re.compile(r"(?:^|(?<=\s))(\d+)/(\d+),\s*(?=[A-Za-z_][\w ./\-]*:\s*[-+]?\.?\d)")  # MONAI's `12/154, train_loss: ..` (`console_labels`)
_COUNTER_BEFORE = re.compile(r"\b(?i:epoch|step|iter|iteration|batch|update)s?\s*[:=#]?\s*$")


def batch_of(body: str) -> re.Match[str] | None:
    """MONAI's `12/154, train_loss: ..`: a count of a total heading a line's metrics, no counter word before it
    (`Epoch 1/35, Train Loss: ..` counts epochs)."""
    m = BATCH_OF.search(body)
    return None if m is None or _COUNTER_BEFORE.search(body, 0, m.start()) else m


_EPOCH_OF = re.compile(r"(?:^|[:\]|>\-\s])\s*(?i:epoch)\s+(\d+)\s*(?:/|\s(?i:of)\s)\s*\d+\s*$")  # MONAI's `epoch 2/5` alone
_INDENTED = re.compile(r"(?:\[[^\]\n]{0,40}\])?[ ]?\t")  # a tab after the line's stamp, if any
_BLANK_INDENTED = re.compile(r"[ ]{2,}\S")  # a line's body indented by blanks (after its logger's prefix)
_EVAL_HEAD = re.compile(r"\b(?i:eval|evaluation|validation|valid|val|test)\b[A-Za-z \t:]*$")  # words to its end
HEAD = -1  # `EpochHeads.held`: the line is a head
_LOSS_WORD = re.compile(r"(?i)(?<![a-z])loss(?![a-z])")  # `loss_D`, `train/loss`, not `gloss`
HEADED = 0  # `Line.total` of a count an `epoch 2/5` head made global: its shape is read line by line (`console_shape`)


class EpochCounter:
    """The state of one log's counter within epochs: (epoch, offset, last counter), None before the first."""

    def __init__(self, anchored: bool = True) -> None:
        self.state: tuple[int, int, int] | None = None
        self.anchored = anchored  # whether a log that starts in a later epoch counts the epochs before it
        self.cadence = 1  # the counter's last step forward: how far from zero an epoch restarts it
        self.anchor = 0  # the epochs before the log's first one, counted in (`step`)
        self.counts_run: bool | None = None  # the epoch moved on: without going back (the counter counts the run)?
        self.first = 0  # the counter at the epoch's first record
        self.offsets: dict[int, int] = {}  # each epoch's offset when it first came
        self.learnt = False  # the logging interval was seen (two records of one epoch), not assumed to be one step
        self.guessed: list[int] = []  # the global steps before epochs crossed while the interval was not known yet
        self.fix: tuple[list[int], int, int] | None = None  # those, the interval's error, the last step it touched
        self.back = False  # the epochs went back (`step`): no steps are put right then (`corrected`)
        self.totalled = False  # a counter printed its total after an epoch (`Epoch: [0][100/773]`)

    def step(self, epoch: int, raw: int, total: int | None) -> int:
        """The global step of counter `raw` (of `total`) printed after `epoch`. Without a total (ESPnet's
        `3epoch:train:401-500batch`, MXNet's `Epoch[2] Batch [20-40]`) the logging interval goes on over an
        epoch's end: the new epoch's first record is one interval after the last one (the epoch's length is
        what that makes it): the steps stay in order, the trainer's own when it logs every N steps."""
        # a log that starts in a later epoch (a resumed run's, a tail) counts the epochs before it when it prints
        # their length: epoch E's batch b is step (E - 1) * total + b, as the whole log would have read it
        self.totalled |= total is not None
        if self.state is None:
            self.anchor = max(epoch - 1, 0) * (total or 0) * self.anchored
        last_epoch, offset, last = self.state or (epoch, self.anchor, raw)
        # the counter moved on within the epoch before: it counts the run (T5's `Epoch 4, Global Batch 7095`), so
        # a next epoch at (or, without a total, past one interval from zero but before) that count is a resume
        # going on from a checkpoint (`Loaded checkpoint ..` then `Epoch 5, Global Batch 7095`): laid over, not offset
        resumed = epoch > last_epoch and last > self.first and (raw == last or not total and self.cadence < raw < last)
        if epoch > last_epoch:
            self.counts_run = (raw > last or resumed) and self.counts_run is not False
        self.back |= epoch < last_epoch
        if resumed:
            pass
        elif epoch < last_epoch:  # the epochs start over (a launch after an aborted one, a resume from an earlier
            offset = self.offsets.get(epoch, self.anchor if total is None else max(epoch - 1, 0) * total)  # epoch):
            # that epoch's steps again, for a restart to be told (`importers.restarts`) or a resume laid over
        elif epoch > last_epoch and raw < last:
            if not total and not self.learnt and self.fix is None:
                self.guessed.append(offset + last)  # one step assumed for the interval: put right once it is seen
            offset += total * (epoch - last_epoch) if total else last + self.cadence - raw
        elif epoch > last_epoch and raw == last:  # one record an epoch at the same count (CycleGAN's `iters: 3648`
            offset += total * (epoch - last_epoch) if total else last  # printed at each epoch's end): an epoch on
        elif raw > last:
            self.cadence, self.learnt = raw - last, True
            if self.guessed and self.fix is None:  # MindSpore's `epoch: 2 step: 181` after `epoch: 1 step: 1000`:
                # the interval over an epoch's end is the interval within one (`step`'s rule), not one step
                error = self.cadence - 1
                self.fix = (self.guessed, error, offset + last)
                offset += error * len(self.guessed)
        if self.state is None or epoch != last_epoch:
            self.first = raw
            self.offsets.setdefault(epoch, offset)
        self.state = (epoch, offset, raw)
        return offset + raw

    def unanchored(self, columns: Any) -> Any:
        """`columns` less the epochs counted in before the log's first one, when the counter turned out to count
        the run: the epoch moved on and the counter never went back (PaddleSeg's `[TRAIN] epoch: 14, iter: 1020/3250`
        after `epoch: 13, iter: 1000/3250`: its total is the run's iterations, not an epoch's). A first record
        cannot tell that apart from a batch count within epoch 13 of 3250 batches (a tail of word_language_model's
        `| epoch 13 | 1000/3250 batches |`, whose next epoch starts the count over)."""
        if not self.anchor or not self.counts_run:
            return columns
        from stethoscope.logtext.coded import CodedColumns, encode

        coded = encode(columns)
        steps = coded.step_array  # (a point below the anchor is another counter's: Caffe's `Iteration 1050, Testing`)
        return CodedColumns(coded.labels, coded.codes, steps - self.anchor * (steps >= self.anchor), coded.value_array,
                            coded.time_list, coded.ordered, coded.last_time)

    def corrected(self, columns: Any) -> Any:
        """`columns` with the steps read before the logging interval was known put right: each record past an
        epoch crossed then moves on by the interval's error once for each such crossing before it (the steps read
        after it were counted with the interval). None found: `columns` as they are."""
        if self.fix is None or not self.fix[1] or self.back:  # (epochs that started over: steps of two launches)
            return columns
        import numpy as np

        from stethoscope.logtext.coded import CodedColumns, encode

        guessed, error, until = self.fix
        coded = encode(columns)
        steps = coded.step_array
        crossed = np.searchsorted(np.asarray(guessed, dtype=np.int64), steps, side="left")  # crossings below each step
        moved = steps + error * crossed * (steps <= until)
        return CodedColumns(coded.labels, coded.codes, moved, coded.value_array, coded.time_list, coded.ordered,
                            coded.last_time)

    def reads(self, steps: Any, last_step: int | None) -> bool:
        """Whether `steps`, read at once without their epochs, are global steps as they are (else those lines
        are read one by one, with their epochs); a fall back that is not near zero is a resume, as one by one."""
        if self.state is not None and self.state[1]:
            return False
        import numpy as np

        raw = np.asarray(steps, dtype=np.int64)
        if raw.size and (last_step is None or raw[0] > last_step) and bool((raw[1:] > raw[:-1]).all()):
            # every step ahead of the one before (the common case): as below, without its step-sized temporaries
            # (a 250,000-turn Composer log: ~5 ms of fresh memory a read)
            if raw.size > 1 or last_step is not None:
                self.cadence, self.learnt = int(raw[-1] - (raw[-2] if raw.size > 1 else last_step)), True
            if self.state is not None:
                self.state = (self.state[0], 0, int(raw[-1]))
            return True
        if last_step is not None:
            raw = np.concatenate(([last_step], raw))
        diffs = np.diff(raw)
        ahead = diffs[diffs > 0]
        cadence = max(int(ahead.max()) if ahead.size else 1, self.cadence)
        if ((diffs < 0) & (raw[1:] <= cadence)).any() or not diffs.all():
            return False  # a restart near 0, or a count repeated (an epoch's record at the same count each time)
        self.cadence, self.learnt = (int(ahead[-1]), True) if ahead.size else (self.cadence, self.learnt)
        if self.state is not None:
            self.state = (self.state[0], 0, int(raw[-1]))
        return True


class RoundedSteps:
    """A step counter printed rounded to a unit (LeRobot's `step:4K` for steps 3,500 to 4,499): the step before it
    plus the logging interval when that rounds to the printed figure (the records between two figures are one
    interval apart), else the figure itself in steps; never back within a figure."""

    def __init__(self) -> None:
        self.before: int | None = None  # the step before the last rounded one

    def step(self, figure: int, unit: int, last: int | None) -> int:
        """The step of a record printing `figure` (in `unit`s), `last` the step read before it."""
        interval = last - self.before if last is not None and self.before is not None else 0
        self.before = last
        if last is not None and interval > 0 and round((last + interval) / unit) == figure:
            return last + interval
        return max(figure * unit, last + 1) if last is not None and round(last / unit) == figure else figure * unit


def bar_step(state: tuple[int, int, int] | None, raw: int) -> tuple[int, tuple[int, int, int]]:
    """The global step of a progress bar's counter (Keras) and the bar's (offset, last counter, largest
    counter) after it: a bar that goes back after reaching its largest counter starts a new epoch, if it
    goes back into the first half (a new epoch's bar restarts near 0); a fall into the second half is a
    redraw printed late (Keras' bar once the loss is nan: 32/32, 31/32, 32/32), read at the bar's place."""
    offset, last, total = state or (0, 0, 0)
    if raw < last and last >= total > 0:
        if 2 * raw > total:
            return offset + last, (offset, last, total)
        offset += total
    return offset + raw, (offset, raw, max(total, last, raw))


def index_steps(counts: list[tuple[int, int | None, int, int]]) -> dict[int, int] | None:
    """The global steps of the records a `[N/T (P%)]` counter numbered 1, 2, 3 … in file order (`counts`: each
    record's number, the epoch before the counter, its count and total), once the counter shows that it counts
    batches, not samples: an index reaches T - 1 at an epoch's end (timm's `Train: 3 [1250/1251 (100%)]`),
    a count of samples never does (PyTorch's `[59520/60000 (99%)]`). Nor do samples counted `batch_idx * batch_size`
    share no factor: counts with no common factor above 1 (`[  1/86]`, `[ 16/86]`, `[ 31/86]`) count batches (or
    samples of batch size 1: the same steps). None until it shows that."""
    if not any(count == total - 1 for _, _, count, total in counts) and reduce(gcd, (c for *_, c, _ in counts), 0) != 1:
        return None
    # an index from 0 within an epoch numbered from 0 (timm's): a log that starts in a later epoch (a resumed run's,
    # `Train: 250 [   0/4]`) counts the epochs before it, epoch E's batch b being step E * T + b (timm's num_updates)
    counter = EpochCounter()
    return {record: counter.step((epoch or 0) + 1, count, total) for record, epoch, count, total in counts}


def renumbered(columns: Any, steps: dict[int, int]) -> Any:
    """`columns` with each record's number replaced by its step in `steps`."""
    from stethoscope.logtext.columns import Columns

    names, numbers, values, times = (list(c) for c in columns)
    return Columns(names, [steps.get(int(n), n) for n in numbers], values, times)


_PHASE = ("train", "training")
_ROUND = re.compile(r"(?i)\btrain(?:ing)?[ \t]+\d+[ \t]*,")  # the word, a blank, the count, a comma


def epoch_step(pairs: list[Any], line: Any) -> int | None:
    """The epoch of a line that prints a whole epoch before its train loss and no finer counter (SpeechBrain's
    `epoch: 1, lr: 1.00e+00 - train loss: 2.34 - valid loss: 2.10`), else None."""
    names = [n[0] for n, _ in pairs]
    loss = LOSS if LOSS in names else CROSS_ENTROPY  # (OpenNMT's `xent`: the loss when none is named)
    if line.eval or loss not in names:
        return None
    # the epoch's key may keep words of a prefix the line did not shed (`rank0: epoch: 1`, `... stdout F epoch: 1`)
    at = next((i for i, (_, v) in enumerate(pairs) if v.key[-5:].lower() == "epoch" and v.key[-6:-5] in ("", " ")),
              None)
    if at is None and pairs and pairs[0][1].key.lower() in _PHASE and _ROUND.search(line.body):
        at = 0  # `Train 3, loss: ..` (a hand-written loop): the training round is the epoch (not `train:  6%|`)
    text = pairs[at][1].text if at is not None else ""
    return int(text) if at is not None and at < names.index(loss) and text.isdigit() else None


class EpochHeads:
    """Lines that print only an epoch (`Epoch 3`, `Training epoch: 3`, `Eval epoch: 3`) and the records after them.

    A head's tab-indented next lines are that epoch's record (st-gcn's `Training epoch: 3` then `\tmean_loss:
    0.52`), named in the eval split under an eval head (`Eval epoch: 3` then `\tmean_loss: ..`, `\tTop1: ..`); an
    indented line with a counter of its own among them is a batch's report within the epoch (kept as a line). A
    head followed by lines that are not indented (nnU-Net: `Epoch 3`, then one value a line) begins the epoch of
    the first train loss printed without a counter after it (`after`). A head with the number of epochs (MONAI's
    `epoch 2/5`) is the epoch of the batch counts heading the lines after it (`12/154, train_loss: 0.61`,
    `console_labels`) and of the progress bars after it (Keras' `Epoch 3/100`, then `128/128 - 0s - loss: ..`:
    a bar that prints only its last count repeats it every epoch), until the next."""

    def __init__(self) -> None:
        self.head: int | None = None  # the epoch the last head began, until a train loss takes it (`after`)
        self.block: tuple[int, bool, int] | None = None  # (epoch, eval?, last line) of the open indented block
        self.eval_head: int | None = None  # the line number of an eval head without values, or of its last record
        self.of_epochs: int | None = None  # the epoch of the last `epoch 2/5` line
        self.record: tuple[int, set[str]] | None = None  # (epoch, names) of the record `after` a head, while open
        self.next_only: int | None = None  # the line of an `epoch 2/5` head, whose epoch only its next line takes
        self.unheaded: set[frozenset[str]] = set()  # the names of losses printed without a counter and no head

    def continued(self, number: int, line: Any) -> None:
        """Mark eval a record continued under an eval head that printed no values (Coqui TTS: `--> EVAL
        PERFORMANCE`, then `| > avg_loss: 0.52` a line; a logger's `Evaluation Results:`, then `   Loss: 0.53` a
        line indented by blanks): its values are the eval's, not the train step's."""
        if self.eval_head is not None and number == self.eval_head + 1 and (line.record or _BLANK_INDENTED.match(
                line.body) and line.step is None and line.values):  # (`📊 Evaluation Results:`, `   Loss: 0.53`)
            line.eval, line.record, self.eval_head = True, True, number
        elif self.eval_head is not None and number == self.eval_head + 1 and line.step is not None and not line.values:
            self.eval_head = number  # the eval's own step among its values (TF Estimator's `  global_step = 5468`)
        else:
            self.eval_head = number if line.step is None and (
                (line.eval and not line.values) or _EVAL_HEAD.search(line.body)) else None

    def held(self, number: int, line: Any) -> int | None:
        """HEAD for a head line, the epoch of a line of a head's indented block (an eval head's marked eval),
        else None."""
        if self.next_only is not None and number != self.next_only + 1:
            self.head = self.next_only = None
        if line.step is None and (head := _EPOCH_OF.search(line.body)):  # (Keras 1's `Epoch 3/15`, then `64s -
            self.of_epochs = self.head = int(head[1])  # loss: 1.46 - acc: ..`: the head's epoch for the line
            self.record, self.next_only = None, number  # right after it only, `after`)
        elif line.epoch is None and line.total and self.of_epochs is not None and (line.bar or batch_of(line.body)):
            # MONAI's `12/154, ..` or Keras' bar (`128/128 - 0s - loss: ..`, often only the epoch's last count)
            # under `epoch 2/5`: the batch within the head's epoch
            line.step, line.epoch = max(self.of_epochs - 1, 0) * line.total + line.step, self.of_epochs
            line.total, line.bar = HEADED, False
        alone = _EPOCH_ALONE.search(line.body) if line.step is None else None
        if alone:
            self.head, self.record, self.next_only = int(alone[3]), None, None
            self.block = (self.head, alone["eval"] is not None, number)
            return HEAD
        block, self.block = self.block, None
        if block is None or number != block[2] + 1 or not _INDENTED.match(line.body):
            return None
        self.block, self.head = (block[0], block[1], number), None
        line.eval = line.eval or block[1]
        return HEAD if line.step is not None else block[0]

    def after(self, pairs: list[Any], line: Any) -> int | None:
        """The step of a record that follows a head on lines of its own (not indented): the head's epoch for the
        first line of losses printed without a counter after it (a train loss, or a GAN's `loss_D: .., loss_G: ..`)
        and for the lines of losses right after that one that print no name it printed (AdvGAN's record on two
        lines; one record an epoch: a loss printed again, an eval's without its word, is none), else None."""
        names = [n[0] for n, _ in pairs]
        if line.eval or not (LOSS in names or CROSS_ENTROPY in names or any(map(_LOSS_WORD.search, names))):
            self.record = None
            return None
        if self.head is not None:
            self.record, self.head = (self.head, set(names)), None
            return self.record[0]
        if self.record is not None and not self.record[1].intersection(names):
            self.record[1].update(names)
            return self.record[0]
        self.record = None
        return None

    def headed(self, names: frozenset[str]) -> bool:
        """Whether a line without a counter, of these names (ours: `train/loss`, not a stray word's), is the
        record of the head right before it (Keras 1's
        `Epoch 3/15`, then `64s - loss: ..`); a line of names printed before with no head is not (an `Epoch 1/10`
        banner between records the reader cannot number): that head heads nothing."""
        if self.head is None:
            self.unheaded.add(names)
            return False
        if self.next_only is not None and names in self.unheaded:
            self.head = self.next_only = None
            return False
        return True
