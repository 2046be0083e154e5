/* The log readers' native line scanner (optional: stethoscope/logtext/linescan.py says when it is used).
 *
 * scan(data, offsets=False) reads a block of log text once and gives, for every line, the hash of its
 * *shape* and its numbers:
 *
 *   - a number starts at a digit, or at `+`/`-`/`.` followed by a digit, where the byte before it is
 *     not part of a word (a letter, a digit, `_` or `.`): `A100`, `fp16`, `rank0` stay text;
 *     it is `[+-]? digits [. digits] [(e|E) [+-] digits]`, parsed to the double that Python's float()
 *     gives for the same text (correctly rounded: an exact fast path, else Python's own dtoa);
 *   - the shape is the line's other bytes, blanks (space, tab, CR) left out, with one mark per number
 *     (one for bare digits, another for the rest): lines that print the same keys in the same order and
 *     the same kind of number, with other values (and other padding), share it.
 *
 * The scan runs without the GIL (a reader may scan the next block in a thread while it reads this one);
 * it takes the GIL back only for a number that needs Python's dtoa (more than 15 significant digits or
 * a power of ten beyond 22).
 *
 * Returned: (hashes, counts, starts, values, number_starts), bytes objects holding native arrays
 * (uint64 per line, uint32 per line, int64 line start offsets, float64 per number, int64 offset of each
 * number in `data` or empty unless `offsets`). A line ends at `\n`; the text after the last `\n` is a
 * line when it is not empty.
 *
 * columns(data, width, picks, kinds, commas[, starts[, per_row]]) reads lines of one console-log shape by their *tokens*, as
 * console_tokens.py does with bytes.translate and split: a token is a run of the bytes that can be part of
 * a number (digits, `.+-eE,`), a comma that a byte outside them follows being a blank. Every line must
 * have `width` tokens; the token at index picks[k] (int32) is read by kinds[k]: `f` as float() reads it,
 * `i` as int() (below 2**53), `r` a rank (plain digits), `d` a YYYY-MM-DD date (days since 1970), `h`
 * and `m` two-digit hours and minutes, `s` seconds with a comma or a point; commas[k] = 1 drops the
 * commas first (`15,723`; for `r`, what comes after the last one). With `starts` (int64 offsets; None:
 * every line), only the lines that start there are read, in that order. With `per_row` k > 1, a row is k
 * lines (a cycle of shapes: Composer's header and its record lines), its tokens counted across them. Returns (lines, float64 bytes, lines x picks) or None
 * when a line or a token does not read that way (the Python path then decides).
 *
 * lines_from(data, start, count, store) finds the first `count` newlines from data[start] (memchr, without
 * the GIL): (how many it found, the offset past the last one, and with `store` the int64 offset past
 * each one, else None).
 *
 * line_kinds(data, start, end) numbers the distinct lines of data[start:end] (split at `\n`, as
 * bytes.split gives them: the text after the last newline is a line, even empty) in the order they first
 * appear: (int32 id per line, int64 start of each line, int64 index of each kind's first line).
 *
 * A line's console *shape* (console_runs.shape_of) is its text without digits, `eE+-`, with `=` and `>`
 * written as `.`. shapes(data, start, end) is the shape text of data[start:end] (bytes); repeats(data,
 * start, unit) counts how many times the shape text from data[start] repeats `unit` (shapes each ending
 * in a newline: one line's, or a cycle's), in one pass over the lines and without writing their shapes:
 * (count, the offset past the last whole repeat). Both without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#define FNV_BASIS 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL
#define INTEGER_MARK 0x01 /* a number written as bare digits */
#define NUMBER_MARK 0x02  /* any other number */
#define MAX_NUMBER 63

typedef struct {
    char *data;
    Py_ssize_t size, cap;
} Buffer;

static int reserve(Buffer *b, Py_ssize_t extra) {
    if (b->size + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->size + extra)
        cap *= 2;
    char *grown = PyMem_RawRealloc(b->data, (size_t)cap);
    if (grown == NULL)
        return -1;
    b->data = grown;
    b->cap = cap;
    return 0;
}

#define PUSH(buffer, type, value)                                       \
    do {                                                                \
        if (reserve(&(buffer), (Py_ssize_t)sizeof(type)) < 0)           \
            goto nomem_released;                                        \
        *(type *)((buffer).data + (buffer).size) = (value);             \
        (buffer).size += (Py_ssize_t)sizeof(type);                      \
    } while (0)

#include "_numbers.h"

#include "_scan.h"

enum { KEPT = 8 };

static unsigned char TOKEN[256]; /* KEPT: a byte that can be part of a number token */

/* The same bytes for columns' loop over a line that ends with a newline: a blank, a part of a token, a
 * comma (a part only where a part or the newline follows it), the newline. */
enum { T_BLANK = 0, T_PART = 1, T_COMMA = 2, T_END = 3 };
static unsigned char TCLASS[256];

static void init_tokens(void) {
    const char *kept = "0123456789.+-eE,";
    for (const char *c = kept; *c; c++) {
        TOKEN[(unsigned char)*c] = KEPT;
        TCLASS[(unsigned char)*c] = T_PART;
    }
    TCLASS[','] = T_COMMA;
    TCLASS['\n'] = T_END;
}

#if defined(__SSE2__) && defined(__GNUC__) && !defined(LINESCAN_BYTES_ONLY) /* (the byte loops: -DLINESCAN_BYTES_ONLY) */
#include <emmintrin.h>
#define SIMD_TOKENS 1

/* Bit j of the results: s[j] (j < 16) is a part of a token other than a comma (digits, `.+-eE`), a comma,
 * a newline. */
static inline void token_masks(const unsigned char *s, uint32_t *part, uint32_t *comma, uint32_t *newline) {
    const __m128i v = _mm_loadu_si128((const __m128i *)s);
    const __m128i from_plus = _mm_sub_epi8(v, _mm_set1_epi8('+'));          /* `+,-./0-9`: 0..14 */
    const __m128i in_range = _mm_cmpeq_epi8(_mm_min_epu8(from_plus, _mm_set1_epi8(14)), from_plus);
    const __m128i is_comma = _mm_cmpeq_epi8(v, _mm_set1_epi8(','));
    const __m128i not_part = _mm_or_si128(is_comma, _mm_cmpeq_epi8(v, _mm_set1_epi8('/')));
    const __m128i is_e = _mm_cmpeq_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('e'));
    *part = (uint32_t)_mm_movemask_epi8(_mm_or_si128(_mm_andnot_si128(not_part, in_range), is_e));
    *comma = (uint32_t)_mm_movemask_epi8(is_comma);
    *newline = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
}
#endif

/* The picked token t[0..len) read into row[k] by kinds[k] (quick_number where it decides); 0 when it does not read. */
static inline int take(const unsigned char *t, Py_ssize_t len, int32_t k, const char *kinds, const char *commas,
                       double *row, PyThreadState **released) {
    if (commas[k] == 0 && (kinds[k] == 'f' || kinds[k] == 'i') && quick_number(t, len, kinds[k], &row[k]))
        return 1;
    return read_token(t, len, kinds[k], commas[k], &row[k], released);
}

static PyObject *columns(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view, picks_view, kinds_view, commas_view, starts_view = {0};
    Py_ssize_t width, per_row = 1;
    if (!PyArg_ParseTuple(args, "y*ny*y*y*|z*n:columns", &view, &width, &picks_view, &kinds_view, &commas_view,
                          &starts_view, &per_row))
        return NULL;
    const int64_t *starts = starts_view.buf; /* the lines to read, by where they start; NULL: every line */
    const Py_ssize_t nstarts = starts ? starts_view.len / (Py_ssize_t)sizeof(int64_t) : 0;
    Py_ssize_t next_start = 0;
    const unsigned char *s = view.buf;
    const Py_ssize_t n = view.len;
    const int32_t *picks = picks_view.buf;
    const char *kinds = kinds_view.buf;
    const char *commas = commas_view.buf;
    const Py_ssize_t npicks = picks_view.len / (Py_ssize_t)sizeof(int32_t);
    PyObject *result = NULL, *sized = NULL; /* sized: the result's bytes, written in place (below) */
    Buffer out = {0};
    int32_t *pick_of = NULL;
    int in_place = 0; /* out.data is sized's */
    int ok = npicks == kinds_view.len && npicks == commas_view.len && width >= 0 && per_row >= 1;
    if (ok) {
        pick_of = PyMem_Malloc((size_t)(width + 1) * sizeof(int32_t));
        if (pick_of == NULL) {
            PyErr_NoMemory();
            goto release;
        }
        for (Py_ssize_t t = 0; t <= width; t++)
            pick_of[t] = -1;
        for (Py_ssize_t k = 0; k < npicks; k++) {
            if (picks[k] < 0 || picks[k] >= width || pick_of[picks[k]] != -1)
                ok = 0;
            else
                pick_of[picks[k]] = (int32_t)k;
        }
    }
    /* Lines by their starts: one row each, so the rows' bytes are known; they are written into the bytes
     * object returned (no growing buffer, no copy at the end: ~30 MB a 1M-line Keras read). */
    if (ok && starts != NULL) {
        in_place = 1;
        sized = PyBytes_FromStringAndSize(NULL, nstarts * npicks * (Py_ssize_t)sizeof(double));
        if (sized == NULL)
            goto release;
        out.data = PyBytes_AS_STRING(sized);
        out.cap = PyBytes_GET_SIZE(sized);
    }
    Py_ssize_t lines = 0, fast_end = n; /* a line that starts before fast_end ends with a newline */
    while (fast_end > 0 && s[fast_end - 1] != '\n')
        fast_end--;
    PyThreadState *released = PyEval_SaveThread();
    Py_ssize_t i = 0;
    while (ok && (starts ? next_start < nstarts : i < n)) {
        if (starts) {
            i = (Py_ssize_t)starts[next_start++];
            if (i < 0 || i > n) {
                ok = 0;
                break;
            }
        }
        if (reserve(&out, npicks * (Py_ssize_t)sizeof(double)) < 0) {
            PyEval_RestoreThread(released);
            PyErr_NoMemory();
            goto release;
        }
        double *row = (double *)(out.data + out.size);
        Py_ssize_t tokens = 0;
        for (Py_ssize_t line = 0; ok && line < per_row; line++) {
            if (line > 0 && i >= n) { /* the data ends inside a row */
                ok = 0;
                break;
            }
#ifdef SIMD_TOKENS
            if (i < fast_end) { /* 16 bytes at a time while 17 are left: tokens found by bit masks */
                uint32_t carry = 0;           /* the byte before the block is a part of a token */
                Py_ssize_t current = i;       /* where the last token started */
                int32_t pending = -1;         /* a picked token that goes on past its block: its pick */
                for (Py_ssize_t p = i;; p += 16) {
                    if (p + 17 > n) { /* near the data's end: the byte loop goes on from the token in progress */
                        if (carry)
                            tokens--;
                        i = carry ? current : p;
                        break;
                    }
                    uint32_t part, comma, newline;
                    token_masks(s + p, &part, &comma, &newline);
                    const uint32_t after = (part | comma | newline) >> 1 | (uint32_t)(TCLASS[s[p + 16]] != T_BLANK) << 15;
                    uint32_t kept = (part | (comma & after)) & (newline ? (newline & -newline) - 1 : 0xFFFF);
                    if (pending >= 0) {
                        const uint32_t end = (uint32_t)__builtin_ctz(~kept | 0x10000);
                        if (end < 16) {
                            if (!take(s + current, p + end - current, pending, kinds, commas, row, &released)) {
                                ok = 0;
                                break;
                            }
                            pending = -1;
                        }
                    }
                    for (uint32_t starts = kept & ~(kept << 1 | carry); starts; starts &= starts - 1) {
                        const uint32_t b = (uint32_t)__builtin_ctz(starts);
                        current = p + b;
                        if (tokens < width && pick_of[tokens] >= 0) {
                            const uint32_t end = (uint32_t)__builtin_ctz((~kept & ~((1u << b) - 1)) | 0x10000);
                            if (end < 16) {
                                if (!take(s + current, end - b, pick_of[tokens], kinds, commas, row, &released)) {
                                    ok = 0;
                                    break;
                                }
                            } else
                                pending = pick_of[tokens];
                        }
                        tokens++;
                    }
                    carry = kept >> 15 & 1;
                    if (!ok || newline) {
                        i = newline ? p + __builtin_ctz(newline) : p;
                        break;
                    }
                }
                if (!ok)
                    break;
                if (s[i] == '\n')
                    goto line_read;
            }
#endif
            if (i < fast_end) { /* the line ends with a newline: a class lookup a byte, no bound checks */
                for (;;) {
                    unsigned char c = TCLASS[s[i]];
                    if (c == T_BLANK || (c == T_COMMA && TCLASS[s[i + 1]] == T_BLANK)) {
                        i++;
                        continue;
                    }
                    if (c == T_END)
                        break;
                    const Py_ssize_t a = i;
                    for (i++; (c = TCLASS[s[i]]) == T_PART || (c == T_COMMA && TCLASS[s[i + 1]] != T_BLANK); i++)
                        ;
                    if (tokens < width && pick_of[tokens] >= 0 &&
                        !take(s + a, i - a, pick_of[tokens], kinds, commas, row, &released)) {
                        ok = 0;
                        break;
                    }
                    tokens++;
                }
            } else {
                while (i < n && s[i] != '\n') {
                    const unsigned char c = s[i];
                    int kept = TOKEN[c] && !(c == ',' && i + 1 < n && s[i + 1] != '\n' && !TOKEN[s[i + 1]]);
                    if (!kept) {
                        i++;
                        continue;
                    }
                    const Py_ssize_t a = i;
                    while (i < n && TOKEN[s[i]] && !(s[i] == ',' && i + 1 < n && s[i + 1] != '\n' && !TOKEN[s[i + 1]]))
                        i++;
                    if (tokens < width && pick_of[tokens] >= 0 &&
                        !take(s + a, i - a, pick_of[tokens], kinds, commas, row, &released)) {
                        ok = 0;
                        break;
                    }
                    tokens++;
                }
            }
#ifdef SIMD_TOKENS
        line_read:
#endif
            if (i < n)
                i++; /* the newline */
        }
        if (tokens != width)
            ok = 0;
        out.size += npicks * (Py_ssize_t)sizeof(double);
        lines++;
    }
    PyEval_RestoreThread(released);
    if (PyErr_Occurred())
        goto release;
    if (!ok) {
        result = Py_NewRef(Py_None);
        goto release;
    }
    result = Py_BuildValue("(nN)", lines, sized != NULL ? sized : as_bytes(&out));
    sized = NULL; /* (the reference went to the result) */
release:
    PyMem_Free(pick_of);
    Py_XDECREF(sized);
    if (!in_place) /* else out.data was the bytes object's */
        PyMem_RawFree(out.data);
    PyBuffer_Release(&view);
    PyBuffer_Release(&picks_view);
    PyBuffer_Release(&kinds_view);
    PyBuffer_Release(&commas_view);
    if (starts_view.obj != NULL)
        PyBuffer_Release(&starts_view);
    return result;
}

/* The offsets past the first `count` newlines from s[at] (fewer where the data ends first), written to
 * `out` unless it is NULL; returns how many were found, and sets *end past the last one (at: none). */
static Py_ssize_t walk_lines(const char *s, Py_ssize_t n, Py_ssize_t at, Py_ssize_t count, int64_t *out,
                             Py_ssize_t *end) {
    Py_ssize_t found = 0, last = at, from = at; /* past the last newline found; the first byte not looked at */
#ifdef SIMD_TOKENS
    for (; found < count && from + 16 <= n; from += 16) /* 16 bytes at a time: short lines cost a memchr call each */
        for (uint32_t nl = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + from)),
                                                                      _mm_set1_epi8('\n')));
             nl && found < count; nl &= nl - 1) {
            last = from + __builtin_ctz(nl) + 1;
            if (out != NULL)
                out[found] = (int64_t)last;
            found++;
        }
#endif
    while (found < count && from < n) {
        const char *nl = memchr(s + from, '\n', (size_t)(n - from));
        if (nl == NULL)
            break;
        last = from = (Py_ssize_t)(nl - s) + 1;
        if (out != NULL)
            out[found] = (int64_t)last;
        found++;
    }
    *end = last;
    return found;
}

static PyObject *lines_from(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, count;
    int store;
    if (!PyArg_ParseTuple(args, "y*nnp:lines_from", &view, &start, &count, &store))
        return NULL;
    PyObject *result = NULL;
    int64_t *out = NULL;
    if (start < 0 || start > view.len || count < 0) {
        PyErr_SetString(PyExc_ValueError, "lines_from: start or count out of range");
        goto release;
    }
    if (store && (out = PyMem_RawMalloc((size_t)(count ? count : 1) * sizeof(int64_t))) == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    Py_ssize_t found, end;
    Py_BEGIN_ALLOW_THREADS
    found = walk_lines(view.buf, view.len, start, count, out, &end);
    Py_END_ALLOW_THREADS
    if (store)
        result = Py_BuildValue("(nny#)", found, end, (const char *)out, found * (Py_ssize_t)sizeof(int64_t));
    else
        result = Py_BuildValue("(nnO)", found, end, Py_None);
release:
    PyMem_RawFree(out);
    PyBuffer_Release(&view);
    return result;
}

typedef struct {
    uint64_t hash;
    Py_ssize_t at, len; /* the kind's first line */
    int32_t id;         /* -1: an empty slot */
} Kind;

static PyObject *line_kinds(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn:line_kinds", &view, &start, &end))
        return NULL;
    PyObject *result = NULL;
    Buffer ids = {0}, starts = {0}, firsts = {0};
    Kind *table = NULL;
    Py_ssize_t cap = 64, kinds = 0;
    if (start < 0 || end < start || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "line_kinds: start or end out of range");
        goto release;
    }
    if ((table = PyMem_RawMalloc((size_t)cap * sizeof(Kind))) == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    for (Py_ssize_t k = 0; k < cap; k++)
        table[k].id = -1;
    const char *s = view.buf;
    Py_ssize_t at = start;
    PyThreadState *released = PyEval_SaveThread();
    while (1) {
        const char *nl = memchr(s + at, '\n', (size_t)(end - at));
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - s) : end;
        uint64_t h = FNV_BASIS ^ (uint64_t)(stop - at); /* 8 bytes a step: equal lines are compared anyway */
        Py_ssize_t i = at;
        for (; i + 8 <= stop; i += 8) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            h = (h ^ word) * FNV_PRIME;
            h ^= h >> 29;
        }
        for (; i < stop; i++)
            h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
        Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(cap - 1));
        while (table[slot].id >= 0 && !(table[slot].hash == h && table[slot].len == stop - at &&
                                         memcmp(s + table[slot].at, s + at, (size_t)(stop - at)) == 0))
            slot = (slot + 1) & (cap - 1);
        if (table[slot].id < 0) {
            if (2 * (kinds + 1) > cap) { /* grow: rehash every kind into twice the slots */
                Py_ssize_t grown_cap = 2 * cap;
                Kind *grown = PyMem_RawMalloc((size_t)grown_cap * sizeof(Kind));
                if (grown == NULL)
                    goto nomem;
                for (Py_ssize_t k = 0; k < grown_cap; k++)
                    grown[k].id = -1;
                for (Py_ssize_t k = 0; k < cap; k++) {
                    if (table[k].id < 0)
                        continue;
                    Py_ssize_t g = (Py_ssize_t)(table[k].hash & (uint64_t)(grown_cap - 1));
                    while (grown[g].id >= 0)
                        g = (g + 1) & (grown_cap - 1);
                    grown[g] = table[k];
                }
                PyMem_RawFree(table);
                table = grown;
                cap = grown_cap;
                slot = (Py_ssize_t)(h & (uint64_t)(cap - 1));
                while (table[slot].id >= 0)
                    slot = (slot + 1) & (cap - 1);
            }
            table[slot] = (Kind){h, at, stop - at, (int32_t)kinds};
            if (reserve(&firsts, (Py_ssize_t)sizeof(int64_t)) < 0)
                goto nomem;
            *(int64_t *)(firsts.data + firsts.size) = (int64_t)(starts.size / (Py_ssize_t)sizeof(int64_t));
            firsts.size += (Py_ssize_t)sizeof(int64_t);
            kinds++;
        }
        if (reserve(&ids, (Py_ssize_t)sizeof(int32_t)) < 0 || reserve(&starts, (Py_ssize_t)sizeof(int64_t)) < 0)
            goto nomem;
        *(int32_t *)(ids.data + ids.size) = table[slot].id;
        ids.size += (Py_ssize_t)sizeof(int32_t);
        *(int64_t *)(starts.data + starts.size) = (int64_t)at;
        starts.size += (Py_ssize_t)sizeof(int64_t);
        if (nl == NULL)
            break;
        at = stop + 1;
    }
    PyEval_RestoreThread(released);
    result = Py_BuildValue("(NNN)", as_bytes(&ids), as_bytes(&starts), as_bytes(&firsts));
    goto release;
nomem:
    PyEval_RestoreThread(released);
    PyErr_NoMemory();
release:
    PyMem_RawFree(ids.data);
    PyMem_RawFree(starts.data);
    PyMem_RawFree(firsts.data);
    PyMem_RawFree(table);
    PyBuffer_Release(&view);
    return result;
}

static int SHAPE[256]; /* a byte's place in a shape: itself, '.' for '=' and '>', -1 left out */

static void init_shape(void) {
    for (int c = 0; c < 256; c++)
        SHAPE[c] = c;
    for (const char *c = "0123456789eE+-"; *c; c++)
        SHAPE[(unsigned char)*c] = -1;
    SHAPE['='] = SHAPE['>'] = '.';
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(LINESCAN_BYTES_ONLY)
#include <tmmintrin.h>
#define SIMD_SHAPES 1
static uint64_t PACK[256];       /* the byte shuffle that packs the bytes of an 8-bit mask to the front */
static unsigned char KEPT_IN[256]; /* how many bits an 8-bit mask has */
static unsigned char SHIFT[9][16];   /* the byte shuffle that moves 8 bytes t places up (zeros below) */
static int has_ssse3;

static void init_pack(void) {
    for (int mask = 0; mask < 256; mask++) {
        uint64_t order = 0;
        int kept = 0;
        for (int b = 0; b < 8; b++)
            if (mask >> b & 1)
                order |= (uint64_t)b << (8 * kept++);
        for (int b = kept; b < 8; b++)
            order |= (uint64_t)0x80 << (8 * b); /* a zero byte: written past the kept ones, overwritten next */
        PACK[mask] = order;
        KEPT_IN[mask] = (unsigned char)kept;
    }
    for (int t = 0; t <= 8; t++)
        for (int b = 0; b < 16; b++)
            SHIFT[t][b] = b >= t && b < t + 8 ? (unsigned char)(b - t) : 0x80;
    __builtin_cpu_init();
    has_ssse3 = __builtin_cpu_supports("ssse3");
}

/* The shape bytes of s[0..16) (the bytes kept: not digits nor `eE+-`; `=` and `>` written as `.`) packed to
 * the front of a register, zeros after them; *kept the mask of the bytes kept, *k how many. */
__attribute__((target("ssse3"))) static inline __m128i shape16(const unsigned char *s, uint32_t *kept, int *k) {
    __m128i v = _mm_loadu_si128((const __m128i *)s);
    const __m128i from_zero = _mm_sub_epi8(v, _mm_set1_epi8('0'));
    const __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(from_zero, _mm_set1_epi8(9)), from_zero);
    const __m128i e = _mm_cmpeq_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('e'));
    const __m128i sign = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('+')), _mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
    const __m128i bar = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('=')), _mm_cmpeq_epi8(v, _mm_set1_epi8('>')));
    v = _mm_or_si128(_mm_andnot_si128(bar, v), _mm_and_si128(bar, _mm_set1_epi8('.')));
    const uint32_t keep = ~(uint32_t)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(digit, e), sign)) & 0xFFFF;
    const unsigned low = keep & 0xFF, high = keep >> 8;
    const __m128i first = _mm_shuffle_epi8(v, _mm_set_epi64x((long long)0x8080808080808080ULL, (long long)PACK[low]));
    const __m128i second = _mm_shuffle_epi8(_mm_srli_si128(v, 8), _mm_cvtsi64_si128((long long)PACK[high]));
    *kept = keep;
    *k = KEPT_IN[low] + KEPT_IN[high];
    return _mm_or_si128(first, _mm_shuffle_epi8(second, _mm_loadu_si128((const __m128i *)SHIFT[KEPT_IN[low]])));
}

/* scan's text bytes from s[i], 16 at a time while 16 are there (i + 16 <= n), up to the first byte that may
 * start a number (a digit, `+`, `-` or `.` that no word byte precedes) or the line's end at `stop`: the
 * blanks left out, the other bytes appended to the shape (hashed by whole words when it fills), *in_word
 * as the byte loop leaves it. Returns where it stopped (i itself when a number may start there). */
__attribute__((target("ssse3"))) static Py_ssize_t text_run(const unsigned char *s, Py_ssize_t i, Py_ssize_t stop,
                                                             Py_ssize_t n, int *in_word, unsigned char *shape,
                                                             int *filled, Lanes *hash) {
    while (i < stop && i + 16 <= n) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        const __m128i from_zero = _mm_sub_epi8(v, _mm_set1_epi8('0'));
        const __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(from_zero, _mm_set1_epi8(9)), from_zero);
        const __m128i from_a = _mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
        const __m128i letter = _mm_cmpeq_epi8(_mm_min_epu8(from_a, _mm_set1_epi8(25)), from_a);
        const __m128i point = _mm_cmpeq_epi8(v, _mm_set1_epi8('.'));
        const __m128i sign = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('+')), _mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
        const __m128i blank = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
                                                        _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))),
                                           _mm_cmpeq_epi8(v, _mm_set1_epi8('\r')));
        const __m128i word = _mm_or_si128(_mm_or_si128(digit, letter),
                                          _mm_or_si128(point, _mm_cmpeq_epi8(v, _mm_set1_epi8('_'))));
        const uint32_t words = (uint32_t)_mm_movemask_epi8(word);
        const uint32_t starts = (uint32_t)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(digit, point), sign));
        const uint32_t valid = stop - i >= 16 ? 0xFFFF : (1u << (stop - i)) - 1;
        const uint32_t number = starts & ~((words << 1) | (uint32_t)(*in_word != 0)) & valid;
        const int upto = number ? __builtin_ctz(number) : (stop - i >= 16 ? 16 : (int)(stop - i));
        if (upto == 0)
            return i;
        const uint32_t keep = ~(uint32_t)_mm_movemask_epi8(blank) & ((1u << upto) - 1);
        const unsigned low = keep & 0xFF, high = keep >> 8;
        _mm_storel_epi64((__m128i *)(shape + *filled), _mm_shuffle_epi8(v, _mm_cvtsi64_si128((long long)PACK[low])));
        *filled += KEPT_IN[low];
        _mm_storel_epi64((__m128i *)(shape + *filled),
                         _mm_shuffle_epi8(_mm_srli_si128(v, 8), _mm_cvtsi64_si128((long long)PACK[high])));
        *filled += KEPT_IN[high];
        if (*filled >= SHAPE_FLUSH)
            shape_flush(hash, shape, filled);
        *in_word = (int)(words >> (upto - 1) & 1);
        i += upto;
        if (number)
            break;
    }
    return i;
}

/* shapes' loop, 16 bytes at a time: how many shape bytes it wrote to out for s[0..len). */
__attribute__((target("ssse3"))) static Py_ssize_t shapes_ssse3(const unsigned char *s, Py_ssize_t len,
                                                                  unsigned char *out) {
    Py_ssize_t n = 0, i = 0;
    uint32_t kept;
    int k;
    for (; i + 16 <= len; i += 16, n += k) /* 16 bytes written, k of them kept (n <= i: within out) */
        _mm_storeu_si128((__m128i *)(out + n), shape16(s + i, &kept, &k));
    for (; i < len; i++) {
        const int c = SHAPE[s[i]];
        out[n] = (unsigned char)c;
        n += c >= 0;
    }
    return n;
}
#endif

static PyObject *shapes(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn:shapes", &view, &start, &end))
        return NULL;
    PyObject *result = NULL;
    if (start < 0 || end < start || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "shapes: start or end out of range");
        goto release;
    }
    result = PyBytes_FromStringAndSize(NULL, end - start); /* written in place, then cut to size: no copy */
    if (result == NULL)
        goto release;
    char *out = PyBytes_AS_STRING(result);
    const unsigned char *s = view.buf;
    Py_ssize_t n = 0;
    Py_BEGIN_ALLOW_THREADS
#ifdef SIMD_SHAPES
    if (has_ssse3)
        n = shapes_ssse3(s + start, end - start, (unsigned char *)out);
    else
#endif
        for (Py_ssize_t i = start; i < end; i++) {
            const int c = SHAPE[s[i]];
            out[n] = (char)c;
            n += c >= 0;
        }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&result, n) < 0)
        result = NULL;
release:
    PyBuffer_Release(&view);
    return result;
}

#ifdef SIMD_SHAPES
/* repeats' loop, 16 bytes of the log at a time (their shape bytes packed, then compared with the unit's
 * next ones): from s[*at], the unit `padded` (m bytes, 16 more of room) at *j; *at is left at the first
 * block of fewer than 16 bytes or at the block where the shapes differ (the byte loop goes on from there
 * with *j as it was at the block's start; at n where that was found byte by byte), *count and *end as the
 * byte loop sets them. */
__attribute__((target("ssse3"))) static void repeats_ssse3(const unsigned char *s, Py_ssize_t n, Py_ssize_t *at,
                                                             const unsigned char *padded, Py_ssize_t m, Py_ssize_t *j,
                                                             Py_ssize_t *count, Py_ssize_t *end) {
    unsigned char packed[16];
    uint32_t kept;
    int k;
    Py_ssize_t i = *at, jj = *j;
    for (; i + 16 <= n; i += 16) {
        const __m128i shape = shape16(s + i, &kept, &k);
        if (k > m - jj) { /* the unit ends inside the block: byte by byte */
            _mm_storeu_si128((__m128i *)packed, shape);
            Py_ssize_t r = 0;
            uint32_t rest = kept;
            for (; r < k; r++, rest &= rest - 1) {
                if (packed[r] != padded[jj])
                    break;
                if (++jj == m) {
                    jj = 0;
                    ++*count;
                    *end = i + __builtin_ctz(rest) + 1;
                }
            }
            if (r < k) { /* they differ: the repeats end here (nothing left for the byte loop) */
                i = n;
                break;
            }
            continue;
        }
        const __m128i same = _mm_cmpeq_epi8(shape, _mm_loadu_si128((const __m128i *)(padded + jj)));
        if ((~(uint32_t)_mm_movemask_epi8(same) & ((1u << k) - 1)) != 0)
            break;
        jj += k;
        if (jj == m) {
            jj = 0;
            ++*count;
            *end = i + (31 - __builtin_clz(kept)) + 1;
        }
    }
    *at = i;
    *j = jj;
}
#endif

static PyObject *repeats(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view, unit_view;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*ny*:repeats", &view, &start, &unit_view))
        return NULL;
    PyObject *result = NULL;
    if (start < 0 || start > view.len || unit_view.len == 0) {
        PyErr_SetString(PyExc_ValueError, "repeats: start out of range or an empty unit");
        goto release;
    }
    const unsigned char *s = view.buf, *unit = unit_view.buf;
    const Py_ssize_t n = view.len, m = unit_view.len;
    Py_ssize_t count = 0, end = start, j = 0, from = start;
#ifdef SIMD_SHAPES
    unsigned char *padded = has_ssse3 ? PyMem_RawCalloc((size_t)m + 16, 1) : NULL;
    if (padded != NULL)
        memcpy(padded, unit, (size_t)m);
#endif
    Py_BEGIN_ALLOW_THREADS
#ifdef SIMD_SHAPES
    if (padded != NULL)
        repeats_ssse3(s, n, &from, padded, m, &j, &count, &end);
#endif
    for (Py_ssize_t i = from; i < n; i++) {
        const int c = SHAPE[s[i]];
        if (c < 0)
            continue;
        if (c != unit[j])
            break;
        if (++j == m) {
            j = 0;
            count++;
            end = i + 1;
        }
    }
    Py_END_ALLOW_THREADS
#ifdef SIMD_SHAPES
    PyMem_RawFree(padded);
#endif
    result = Py_BuildValue("(nn)", count, end);
release:
    PyBuffer_Release(&view);
    PyBuffer_Release(&unit_view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS,
     "scan(data, offsets=False) -> (hashes, counts, starts, values, number_starts): see the module source."},
    {"columns", columns, METH_VARARGS,
     "columns(data, width, picks, kinds, commas[, starts[, per_row]]) -> (rows, values) or None: see the module source."},
    {"lines_from", lines_from, METH_VARARGS,
     "lines_from(data, start, count, store) -> (found, end, offsets past each newline or None): see the module source."},
    {"line_kinds", line_kinds, METH_VARARGS,
     "line_kinds(data, start, end) -> (ids, starts, firsts): see the module source."},
    {"shapes", shapes, METH_VARARGS, "shapes(data, start, end) -> the shape text of data[start:end]: see the module source."},
    {"repeats", repeats, METH_VARARGS,
     "repeats(data, start, unit) -> (count, end): how many times the shapes from data[start] repeat unit."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan", "The log readers' native line scanner.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__linescan(void) {
    init_kinds();
    init_tokens();
    init_numbers();
    init_shape();
#ifdef SIMD_SHAPES
    init_pack();
#endif
    return PyModule_Create(&module);
}
