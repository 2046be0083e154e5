"""The step x series table of a whole log: points pivoted into rows with numpy, and the rows to replay.

Up to `DENSE_LIMIT` steps every step is replayed through the detectors; beyond that they see every
k-th step plus what a vectorised screen finds unusual: events (non-finite values, loss-scale drops,
LR jumps, evals) and jumps of loss / grad norm / step time above their recent level by more than
their own noise, each jump with the steps around it, so a 1M-step log costs ~8-50k replayed steps,
noisy or not. Resumes (steps going backwards) are kept apart as row segments.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from stethoscope.detect.config import DetectConfig
from stethoscope.importers.base import Columns
from stethoscope.logtext.coded import CodedColumns, RowBlock, encode
from stethoscope.logtext.coded_parts import PartsColumns
from stethoscope.records import (
    EVAL_LOSS,
    GRAD_NORM,
    LOSS,
    LOSS_SCALE,
    LR,
    NAN_ITERS,
    STEP_TIME,
    StepRecord,
)

DENSE_LIMIT = 50_000  # steps replayed one by one; above it, decimate + patches
_SAMPLE_TARGET = 8_000  # decimated steps in a big log
_PATCH_BEFORE, _PATCH_AFTER = 40, 60  # dense steps around each unusual one
_MAX_PATCHES = 400
_BLOCK = 32  # values behind each screen's reference level
_NOISE_BLOCKS = 8  # blocks behind its noise
_SCREEN_SIGMAS = 2 / 3  # a jump screened at 2/3 of the detectors' spike_sigma: what they could call a spike
_MEAN_GAP_TO_SIGMA = np.sqrt(np.pi) / 2  # sigma of normal noise from the mean |difference| of successive values


class Table:
    """Points pivoted into rows (one per step, in log order with resumes kept apart) x series."""

    def __init__(self, names: list[str], steps: np.ndarray, values: np.ndarray, present: np.ndarray,
                 last_time: float | None) -> None:
        self.names = names
        self.col = {n: i for i, n in enumerate(names)}
        self.steps = steps
        self.values = values
        self.present = present
        self.last_time = last_time
        self._series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._all_steps: np.ndarray | None = None
        self._all_rows: np.ndarray | None = None
        if steps.size and bool(np.all(steps[1:] > steps[:-1])):
            self.n_steps = int(steps.size)
        else:
            self.n_steps = int(np.unique(steps).size) if steps.size else 0

    @classmethod
    def from_columns(cls, columns: Columns | CodedColumns) -> Table:
        """The table of an importer's points; CodedColumns (a big log's) are pivoted as they are."""
        if isinstance(columns, CodedColumns):
            if columns.size == 0:
                return cls._empty()
            stacked = cls._stacked(columns) if isinstance(columns, PartsColumns) else None
            if stacked is not None:
                return stacked
            names, codes = columns.first_seen()
            return cls._pivot(names, codes, columns.step_array, columns.value_array, columns.last_time)
        n = len(columns.names)
        if n == 0:
            return cls._empty()
        names, codes = _name_codes(columns.names)
        steps = np.fromiter(columns.steps, dtype=np.int64, count=n)
        values = np.fromiter(columns.values, dtype=np.float64, count=n)
        return cls._pivot(names, codes, steps, values, columns.times[-1])

    @classmethod
    def _stacked(cls, columns: PartsColumns) -> Table | None:
        """A big log's parts' rows one under the other: `_pivot` of their points where each part's rows are
        in step order, every row's step above the step of the row before it (no step in two parts) and no
        part has a name twice, without laying the points out; None otherwise (then they are pivoted)."""
        index: dict[str, int] = {}  # a name's column: as `join` numbers them (columns.labels may be renamed)
        pieces: list[tuple[np.ndarray, list[int], list[np.ndarray] | np.ndarray, np.ndarray | None]] = []
        for part in columns.parts:
            if isinstance(part, RowBlock):
                if not part.ordered:
                    return None
                at = [index.setdefault(name, len(index)) for name in part.names]
                pieces.append((part.steps, at, part.columns, None))
                continue
            coded = encode(part)
            steps = coded.step_array
            if not coded.ordered or not bool(np.all(steps[1:] >= steps[:-1])):
                return None
            sub = cls._pivot(coded.labels, coded.codes, steps, coded.value_array, None)
            at = [index.setdefault(name, len(index)) for name in coded.labels]
            pieces.append((sub.steps, at, sub.values.T, sub.present))
        steps = np.concatenate([piece[0] for piece in pieces])
        if len(index) != len(columns.labels) or not bool(np.all(steps[1:] > steps[:-1])):
            return None
        # Column by column (each series contiguous): the parts' columns are written and `series` read as one
        # run of memory each, not every width-th double.
        matrix = np.full((steps.size, len(index)), np.nan, order="F")
        present = np.zeros((steps.size, len(index)), dtype=bool, order="F")
        row = 0
        for piece_steps, at, values, shown in pieces:
            end = row + piece_steps.size
            for column, value in zip(at, values):
                matrix[row:end, column] = value
            present[row:end, at] = True if shown is None else shown
            row = end
        return cls(list(columns.labels), steps, matrix, present, columns.last_time)

    @classmethod
    def _empty(cls) -> Table:
        return cls([], np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros((0, 0), bool), None)

    @classmethod
    def _pivot(cls, names: list[str], codes: np.ndarray, steps: np.ndarray, values: np.ndarray,
               last_time: float | None) -> Table:
        """One row per step (per resume segment), in step order; `codes` index `names`."""
        if bool(np.all(steps[1:] >= steps[:-1])):  # the common case: already in step order, no resume
            new = np.ones(steps.size, dtype=bool)
            new[1:] = steps[1:] != steps[:-1]
        else:
            seg = _segments(codes, steps, len(names))
            order = np.lexsort((steps, seg)) if seg.any() else np.argsort(steps, kind="stable")
            steps, seg, codes, values = steps[order], seg[order], codes[order], values[order]
            new = np.ones(steps.size, dtype=bool)
            new[1:] = (steps[1:] != steps[:-1]) | (seg[1:] != seg[:-1])
        width = len(names)
        small = np.int32 if steps.size * max(width, 1) < 2**31 else np.int64  # int32: a 2x faster cumsum
        at = (np.cumsum(new, dtype=small) - 1) * width + codes  # flat index: 2x faster than [row, col]
        n_rows = int(np.count_nonzero(new))
        matrix = np.full(n_rows * width, np.nan)
        present = np.zeros(n_rows * width, dtype=bool)
        matrix[at] = values
        present[at] = True
        return cls(list(names), steps[new], matrix.reshape(n_rows, width), present.reshape(n_rows, width), last_time)

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one series in row order, read-only (kept: a diagnosis asks for the loss 5 times);
        empty arrays when absent."""
        got = self._series.get(name)
        if got is None:
            got = self._series[name] = self._series_of(name)
            for a in got:
                a.flags.writeable = False
        return got

    def _series_of(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        c = self.col.get(name)
        if c is None:
            return np.zeros(0, np.int64), np.zeros(0)
        mask = self.present[:, c]
        if mask.all():  # the common case (a series logged at every row): copies, ~5x cheaper than masking
            if self._all_steps is None:
                self._all_steps = self.steps.copy()  # one copy for every series logged at every row
            return self._all_steps, self.values[:, c].copy()
        return self.steps[mask], self.values[mask, c]

    def has(self, name: str) -> bool:
        return name in self.col

    def replay_rows(self, cfg: DetectConfig) -> np.ndarray:
        n = self.steps.size
        if n <= DENSE_LIMIT:
            return np.arange(n)
        keep = np.zeros(n, dtype=bool)
        keep[:: max(1, n // _SAMPLE_TARGET)] = True
        keep[-_PATCH_AFTER:] = True
        events, patched = self._unusual(cfg)
        for i in patched:
            keep[max(0, i - _PATCH_BEFORE): i + _PATCH_AFTER] = True
        keep[events] = True
        return np.flatnonzero(keep)

    def _unusual(self, cfg: DetectConfig) -> tuple[np.ndarray, np.ndarray]:
        """Rows a detector may care about, found with a few vectorised passes: (events, kept whatever the
        sampling; rows that get a dense patch around them).

        Events (non-finite values, evals, nan-iteration counts, loss-scale drops, LR jumps) say nothing
        about the loss's level, so each is replayed as it is. A jump (loss, grad norm or step time above
        its recent level by more than its own noise) is a value picked for being high: replayed without
        the steps around it, a run of such picks reads as a sustained rise to the detectors. So a jump
        is replayed only inside its patch, and when there are more than `_MAX_PATCHES` candidates
        (events first, in log order), the jumps that stand out most get them."""
        events: list[np.ndarray] = []
        for name in (EVAL_LOSS, NAN_ITERS):
            c = self.col.get(name)
            if c is not None:
                events.append(np.flatnonzero(self.present[:, c]))
        nonfinite: list[np.ndarray] = []
        jump_rows: list[np.ndarray] = []
        jump_scores: list[np.ndarray] = []
        for name, rel in ((LOSS, cfg.loss_spike_min_rel), (GRAD_NORM, cfg.grad_spike_min_ratio - 1),
                          (STEP_TIME, cfg.dip_min_rel)):
            bad, rows, score = self._jumps(name, rel, _SCREEN_SIGMAS * cfg.spike_sigma)
            nonfinite.append(bad)
            jump_rows.append(rows)
            jump_scores.append(score)
        marked = [*nonfinite, self._drops(LOSS_SCALE), self._lr_jumps()]
        marked_rows = np.unique(np.concatenate(marked))
        rows, scores = np.concatenate(jump_rows), np.concatenate(jump_scores)
        room = max(0, _MAX_PATCHES - marked_rows.size)
        top = rows[np.argsort(-scores, kind="stable")[:room]]
        patched = np.unique(np.concatenate((marked_rows[:_MAX_PATCHES], top)))
        return np.unique(np.concatenate([*events, marked_rows])), patched

    def _column(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        c = self.col.get(name)
        if c is None:
            return None
        mask = self.present[:, c]
        if mask.all():  # a series logged at every row, as `series` finds: no gather, the rows 0..n-1 shared
            if self._all_rows is None:
                self._all_rows = np.arange(mask.size)
                self._all_rows.flags.writeable = False
            return self._all_rows, self.series(name)[1]
        rows = np.flatnonzero(mask)
        return rows, self.values[rows, c]

    def _jumps(self, name: str, rel: float, sigmas: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows where the series turned non-finite, rows where it jumped, how far each jump stands out):
        a jump is a value above the previous block's median by `rel` of it and by `sigmas` times the
        series' noise there; its score is that excess over the larger of the two bars."""
        empty = np.zeros(0, np.int64)
        got = self._column(name)
        if got is None:
            return empty, empty, np.zeros(0)
        rows, v = got
        bad = ~np.isfinite(v)
        ref, noise = _previous_block_levels(np.where(bad, np.nan, v) if bad.any() else v, _BLOCK)  # one a block
        bar = np.maximum(rel * np.abs(ref), sigmas * noise)
        blocks = _padded(v, ref.size * _BLOCK)  # the values by block (NaN after the last: never a jump)
        with np.errstate(invalid="ignore"):
            over = blocks.reshape(ref.size, _BLOCK) > (ref + bar)[:, None]
        at = np.flatnonzero(over & np.isfinite(ref)[:, None])
        of = at // _BLOCK
        with np.errstate(all="ignore"):
            score = (v[at] - ref[of]) / bar[of]
        first_bad = bad & ~np.concatenate(([False], bad[:-1]))
        return rows[first_bad], rows[at], np.where(np.isfinite(score), score, np.inf)

    def _drops(self, name: str) -> np.ndarray:
        got = self._column(name)
        if got is None:
            return np.zeros(0, np.int64)
        rows, v = got
        return rows[1:][v[1:] < v[:-1]]

    def _lr_jumps(self) -> np.ndarray:
        got = self._column(LR)
        if got is None or got[1].size < 3:
            return np.zeros(0, np.int64)
        rows, v = got
        d = np.abs(np.diff(v))
        typical = np.median(d) if d.size else 0.0
        idx = np.flatnonzero((d > 10 * typical) & (d > 0)) + 1
        zero = np.flatnonzero(v == 0)
        return rows[np.unique(np.concatenate((idx, zero[:: max(1, zero.size // 50)] if zero.size else zero)))]

    def records(self, rows: np.ndarray) -> list[StepRecord]:
        names = self.names
        out = []
        vals = self.values[rows].tolist()
        pres = self.present[rows].tolist()
        for step, vrow, prow in zip(self.steps[rows].tolist(), vals, pres):
            out.append(StepRecord(step, {names[c]: vrow[c] for c, p in enumerate(prow) if p}))
        return out


_SHARED_NAMES_MAX = 256  # distinct string objects among the first points above which names are hashed


def _name_codes(point_names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct series names (in order of first appearance) and each point's index into them.

    Names are few and their string objects shared, so the identities are compared in numpy (a C loop
    over millions of points) and equal strings with different identities are merged afterwards."""
    n = len(point_names)
    if len({id(x) for x in point_names[:4096]}) > _SHARED_NAMES_MAX:
        return _name_codes_by_value(point_names)  # one string object per point (rows read from SQLite)
    ids = np.fromiter(map(id, point_names), dtype=np.int64, count=n)
    codes = np.full(n, -1, dtype=np.int64)
    firsts: list[int] = []
    todo = ids
    while todo.size:  # series logged in blocks (TensorBoard) first appear late: repeat on what is left
        for u in dict.fromkeys(todo[:4096].tolist()):  # the identities seen first, in order
            hit = ids == u
            codes[hit] = len(firsts)
            firsts.append(int(np.argmax(hit)))
        todo = ids[codes == -1]
    names: list[str] = []
    index: dict[str, int] = {}
    remap = np.empty(len(firsts), dtype=np.int64)
    for k, first in enumerate(firsts):
        name = point_names[first]
        if name not in index:
            index[name] = len(names)
            names.append(name)
        remap[k] = index[name]
    return names, remap[codes]


def _name_codes_by_value(point_names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """`_name_codes` by hashing each name: O(points) whatever the string objects."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(x, len(index)) for x in point_names), dtype=np.int64,
                        count=len(point_names))
    return list(index), codes


def _segments(codes: np.ndarray, steps: np.ndarray, n_codes: int) -> np.ndarray:
    """Per point, how many times its series' steps went backwards before it (a resume in the log). A step back
    by less than the series' usual step forward is a line printed late (Keras redraws its bar at 23, 22, 21
    of 32), not a resume: read in step order with the rest."""
    order = np.argsort(codes, kind="stable")
    c, s = codes[order], steps[order]
    same = c[1:] == c[:-1]
    diff = s[1:] - s[:-1]
    ahead = np.flatnonzero(same & (diff > 0))
    cadence = np.ones(max(n_codes, 1))
    if ahead.size:  # each series' median step forward: sorted by (series, step), the middle of each group
        k, d = c[1:][ahead], diff[ahead]
        by = np.lexsort((d, k))
        k, d = k[by], d[by]
        starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
        ends = np.concatenate((starts[1:], [k.size]))
        cadence[k[starts]] = d[(starts + ends - 1) // 2]
    back = np.zeros(codes.size, dtype=np.int64)
    back[1:] = same & (-diff >= cadence[c[1:]])
    if not back.any():
        return np.zeros(codes.size, dtype=np.int64)
    cum = np.cumsum(back)
    first = np.ones(codes.size, dtype=bool)
    first[1:] = c[1:] != c[:-1]
    base = np.maximum.accumulate(np.where(first, cum, 0))
    seg = np.empty_like(cum)
    seg[order] = cum - base
    return seg


def _previous_block_levels(v: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """For each block of `block` values, the median of the previous block and the series' noise there:
    the sigma that the mean |difference| of successive values gives for normal noise, per block, then
    the median over the `_NOISE_BLOCKS` previous blocks (so that neither one quiet block nor one spike
    sets it). NaNs ignored."""
    n = v.size
    k = -(-n // block)
    blocks = _padded(v, k * block).reshape(k, block)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = _block_medians(blocks)
        gaps = np.abs(np.diff(blocks, axis=1))
        mean_gap = np.nanmean(gaps, axis=1) if np.isnan(gaps).any() else gaps.mean(axis=1)
        noise = _MEAN_GAP_TO_SIGMA * mean_gap
        if k >= _NOISE_BLOCKS:
            noise[_NOISE_BLOCKS - 1:] = _block_medians(np.lib.stride_tricks.sliding_window_view(noise, _NOISE_BLOCKS))
    noise = np.where(np.isfinite(noise), noise, 0.0)
    prev = np.concatenate(([med[0]], med[:-1]))
    prev_noise = np.concatenate(([noise[0]], noise[:-1]))
    return prev, prev_noise


def _padded(v: np.ndarray, size: int) -> np.ndarray:
    """`v` followed by NaNs up to `size` values (`v` itself when it has as many: no 8 MB copy of a big log's)."""
    if v.size == size:
        return v
    out = np.empty(size)
    out[:v.size] = v
    out[v.size:] = np.nan
    return out


def _block_medians(blocks: np.ndarray) -> np.ndarray:
    """np.nanmedian per row; rows without a NaN (nearly all) by `_sorted_medians`, which gives the same
    doubles (tests/diagnose/test_table.py) at a twentieth of the cost."""
    holed = np.isnan(blocks).any(axis=1)
    if not holed.any():
        return _sorted_medians(blocks)
    med = np.empty(blocks.shape[0])
    med[~holed] = _sorted_medians(blocks[~holed])
    med[holed] = np.nanmedian(blocks[holed], axis=1)
    return med


def _sorted_medians(rows: np.ndarray) -> np.ndarray:
    """np.median per row of rows without NaN, to the bit: the middle of each sorted row, or the mean of its two
    middle values, (a + b) / 2 as np.median's mean takes it. numpy sorts short rows with SIMD: ~1.7 ms for
    31,250 rows of 32, where np.median's partitions take ~30 ms (the replay screen takes six such medians).
    Where a middle value is zero, which of -0.0 and 0.0 lands there is the algorithm's: np.median decides."""
    ordered = np.sort(rows, axis=1)
    half = rows.shape[1] // 2
    if rows.shape[1] % 2:
        med, zero = ordered[:, half], ordered[:, half] == 0
    else:
        med = (ordered[:, half - 1] + ordered[:, half]) / 2
        zero = (ordered[:, half - 1] == 0) | (ordered[:, half] == 0)
    if zero.any():
        med[zero] = np.median(rows[zero], axis=1)
    return med
