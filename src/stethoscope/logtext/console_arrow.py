"""The console reader's run of one line shape read by pyarrow's CSV parser (C++), when pyarrow is installed.

Lines of one shape (the same text once digits are removed) have the same non-number text in the same
order, so once every byte that cannot be part of a number is a blank (`console_tokens.number_text`) their
blanks fall in the same runs: split at every single blank, each line gives the same fields, empty ones
included, and token k of the plan is always field f(k). That is a CSV file with a blank as delimiter,
which pyarrow reads column-wise, converting only the columns the plan needs: no Python object per
token, ~5x the token-list path (`console_tokens.read`) on the same run. The columns stay numpy arrays into the
point table (no Python object per point either). The numbers are the same
doubles (Arrow parses floats correctly rounded, as `float()` does; scales are one multiplication);
timestamps go through `stamp_seconds`'s minute arithmetic, once per distinct minute.

Anything that does not fit (a row count or field count that differs, a token that is not a number)
returns None and the caller reads the run the other way.
"""

from __future__ import annotations

from operator import gt
from typing import Any

from stethoscope.logtext.console_tokens import Plan, Read, number_text
from stethoscope.logtext.loglines import minute_start

MIN_LINES = 4096  # below this the token lists cost less than starting the CSV reader


def available() -> bool:
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


def read(p: Plan, raw: Any, lines: int | None, keep_rank: bytes | None) -> Read | None:
    """The columns of `lines` lines of one shape (`raw`: those lines, each ending in a newline, as bytes;
    or as a pyarrow buffer of their `number_text`); lines None: as many as `raw` holds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    text = pa.py_buffer(number_text(raw)) if isinstance(raw, bytes) else raw
    head = text.slice(0, min(text.size, 1 << 16)).to_pybytes()
    end = head.find(b"\n")
    fields = head[:end if end >= 0 else len(head)].split(b" ")
    at = [i for i, f in enumerate(fields) if f]  # token k → its field
    if len(at) != p.width or not text.size or text.slice(text.size - 1).to_pybytes() != b"\n":
        return None
    names = [f"f{i}" for i in range(len(fields))]
    strings = {p.rank, *p.commas, *((p.time, p.time + 3) if p.time is not None else ())} - {None}
    wanted = {j for j in (p.step, p.rank, *p.values, *(range(p.time, p.time + 4) if p.time is not None else ()))
              if j is not None}
    types = {names[at[j]]: pa.string() if j in strings else pa.int64() if j == p.step else pa.float64()
             for j in wanted}
    try:
        table = pcsv.read_csv(
            pa.BufferReader(text),
            read_options=pcsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pcsv.ParseOptions(delimiter=" ", quote_char=False, escape_char=False,
                                            ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(column_types=types, include_columns=list(types),
                                                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a field count that differs, a token that is no number
        return None
    if lines is not None and table.num_rows != lines:
        return None
    lines = table.num_rows

    def column(j: int) -> Any:
        return table.column(names[at[j]])

    def number(j: int, kind: Any) -> Any:
        c = column(j)
        if j in p.commas:  # thousands separators (the shape fixes which tokens have them)
            import pyarrow.compute as pc  # only here: its import costs as much as reading 5 MB

            c = pc.cast(pc.replace_substring(c, ",", ""), kind)
        return c.to_numpy()

    try:
        steps = None if p.step is None else number(p.step, pa.int64())
        values = [number(j, pa.float64()) for j in p.values]
        times = None if p.time is None else _times(column(p.time), column(p.time + 1), column(p.time + 2),
                                                   column(p.time + 3))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, OverflowError):
        return None
    values = [v if s == 1.0 else v * s for v, s in zip(values, p.scales)]
    keep = None
    ranks: frozenset[bytes] = frozenset()
    if p.rank is not None and keep_rank is not None:
        import pyarrow.compute as pc

        rank = column(p.rank)
        if p.rank in p.commas:  # mpirun's [1,0]: the local rank is the second number
            rank = pc.replace_substring_regex(rank, r"^.*,", "")
        keep = pc.equal(rank, keep_rank.decode()).to_numpy(zero_copy_only=False)
        ranks = frozenset(r.encode() for r in pc.unique(rank).to_pylist())
        if keep.all():
            keep = None
    if keep is not None:
        steps = None if steps is None else steps[keep]
        values = [v[keep] for v in values]
        times = None if times is None else times[keep]
    kept = lines if keep is None else int(np.count_nonzero(keep))
    return Read(steps, values, times, kept, ranks, keep, lines)  # arrays: a block of points takes them as they are


def is_arrays(read: Read) -> bool:
    return not isinstance(read.steps, list) and bool(read.values) and not isinstance(read.values[0], list)


def as_lists(read: Read) -> Read:
    """`read` with lists, as the token path gives them (a short block, a progress bar's steps)."""
    return Read(None if read.steps is None else read.steps.tolist(),  # type: ignore[attr-defined]
                [v.tolist() for v in read.values],  # type: ignore[attr-defined]
                None if read.times is None else read.times.tolist(), read.kept, read.ranks,  # type: ignore[attr-defined]
                read.keep, read.rows)


def backwards(steps: Any) -> int:
    """How many times the step counter goes back (a resume) in `steps` (a list or an array)."""
    if isinstance(steps, list):
        return sum(map(gt, steps, steps[1:]))
    return int((steps[1:] < steps[:-1]).sum())


def _times(date: Any, hour: Any, minute: Any, second: Any) -> Any:
    """Unix seconds as `console_tokens._times` computes them: the minute's start (UTC) + the seconds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    days = date.combine_chunks().dictionary_encode()
    h = pc.cast(hour, pa.int64()).to_numpy()
    m = pc.cast(minute, pa.int64()).to_numpy()
    key = days.indices.to_numpy().astype(np.int64) * 1440 + h * 60 + m
    uniq, inverse = np.unique(key, return_inverse=True)
    texts = days.dictionary.to_pylist()
    starts = np.array([float(minute_start(int(texts[k // 1440][0:4]), int(texts[k // 1440][5:7]),
                                          int(texts[k // 1440][8:10]), k % 1440 // 60, k % 60)) for k in uniq.tolist()])
    seconds = pc.cast(pc.replace_substring(second, ",", "."), pa.float64()).to_numpy()
    return starts[inverse] + seconds
