/* The line scanner's `scan` (included by _linescan.c, whose header says what it reads): the byte kinds, a
 * line's shape hash, a number read in one pass, the line loop (compiled twice: with the SSSE3 text reader
 * `text_run`, defined in _linescan.c beside the shuffle tables it uses, and without) and the Python entry.
 */
/* What each byte can be, looked up once per byte in the scan loop. */
enum { BLANK = 1, WORD = 2, NUMBER_START = 4 };
static unsigned char KIND[256];

static void init_kinds(void) {
    for (int c = 0; c < 256; c++) {
        unsigned char kind = 0;
        if (c == ' ' || c == '\t' || c == '\r')
            kind |= BLANK;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.')
            kind |= WORD;
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')
            kind |= NUMBER_START;
        KIND[c] = kind;
    }
}

/* A line's shape is gathered into a buffer and hashed 16 bytes at a time, a multiply per 8 bytes in two
 * lanes (two chains of multiplies side by side: one chain's latency was the scan's floor), the shift folding
 * the high bits down (a multiply alone never carries them into the low ones); then the lanes in order, the
 * last bytes (under 16) and their count end the line. The buffer is hashed whenever SHAPE_FLUSH bytes are
 * in it, by 16-byte units (where the flushes fall does not change the hash). */
#define SHAPE_FLUSH 64

typedef struct {
    uint64_t a, b;
} Lanes;

static inline uint64_t shape_mix(uint64_t hash, uint64_t word) {
    hash = (hash ^ word) * FNV_PRIME;
    return hash ^ (hash >> 29);
}

static inline void shape_units(Lanes *hash, const unsigned char *buf, int len) {
    for (int k = 0; k + 16 <= len; k += 16) {
        uint64_t first, second;
        memcpy(&first, buf + k, 8);
        memcpy(&second, buf + k + 8, 8);
        hash->a = shape_mix(hash->a, first);
        hash->b = shape_mix(hash->b, second);
    }
}

static inline uint64_t shape_end(Lanes *hash, const unsigned char *buf, int len) {
    shape_units(hash, buf, len);
    const int at = len & ~15, rest = len & 15;
    uint64_t first = 0, second = 0;
    memcpy(&first, buf + at, (size_t)(rest < 8 ? rest : 8));
    if (rest > 8)
        memcpy(&second, buf + at + 8, (size_t)(rest - 8));
    const uint64_t h = shape_mix(shape_mix(FNV_BASIS, hash->a), hash->b);
    return shape_mix(shape_mix(shape_mix(h, first), second), (uint64_t)rest);
}

/* Hash the whole 16-byte units of the shape gathered so far; what is left (under 16 bytes) moves to the front. */
static inline void shape_flush(Lanes *hash, unsigned char *shape, int *filled) {
    const int whole = *filled & ~15;
    shape_units(hash, shape, whole);
    memcpy(shape, shape + whole, 16); /* what is left, and a few bytes more (the buffer has room) */
    *filled -= whole;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(LINESCAN_BYTES_ONLY)
#define SIMD_SCAN 1
static int has_ssse3; /* set by init_pack */
static Py_ssize_t text_run(const unsigned char *s, Py_ssize_t i, Py_ssize_t stop, Py_ssize_t n, int *in_word,
                           unsigned char *shape, int *filled, Lanes *hash);
#endif

/* The number at s[0..n) as scan reads it, `[+-]? digits [. digits] [(e|E) [+-] digits]` with at least one
 * digit (a point only where a digit is next to it; an exponent only with its digits), and parse_number's
 * double for it, in one pass where that is exact the quick way (at most 15 significant digits and a power
 * of ten within 22; else parse_number decides): 0 and *length, *bare (bare digits) and *out; 1 where no
 * number is read there (none starts, or it is longer than MAX_NUMBER: text); -1 on an error from Python's
 * dtoa. */
static inline int scan_number(const unsigned char *s, Py_ssize_t n, Py_ssize_t *length, int *bare, double *out,
                              PyThreadState **released) {
    Py_ssize_t j = 0;
    int negative = 0;
    if (s[0] == '+' || s[0] == '-') {
        negative = s[0] == '-';
        j = 1;
    }
    uint64_t mantissa = 0;
    int significant = 0, power = 0;
    Py_ssize_t digits = 0;
    for (; j < n && is_digit(s[j]); j++, digits++) {
        if (mantissa == 0 && s[j] == '0')
            continue; /* a leading zero */
        if (++significant <= 19)
            mantissa = mantissa * 10 + (uint64_t)(s[j] - '0');
    }
    const Py_ssize_t whole = j;
    if (j < n && s[j] == '.' && (digits || (j + 1 < n && is_digit(s[j + 1])))) {
        for (j++; j < n && is_digit(s[j]); j++, digits++) {
            power--;
            if (mantissa == 0 && s[j] == '0')
                continue;
            if (++significant <= 19)
                mantissa = mantissa * 10 + (uint64_t)(s[j] - '0');
        }
    }
    if (!digits)
        return 1;
    int exp_digits = 0;
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
        Py_ssize_t k = j + 1;
        int exp_negative = 0, exponent = 0;
        if (k < n && (s[k] == '+' || s[k] == '-')) {
            exp_negative = s[k] == '-';
            k++;
        }
        for (; k < n && is_digit(s[k]); k++) {
            if (exp_digits++ < 6)
                exponent = exponent * 10 + (s[k] - '0');
        }
        if (exp_digits) {
            j = k;
            power += exp_negative ? -exponent : exponent;
        }
    }
    if (j > MAX_NUMBER)
        return 1;
    *length = j;
    *bare = whole == j && is_digit(s[0]);
    if (significant <= 15 && exp_digits <= 6 && (mantissa == 0 || (power >= -22 && power <= 22))) {
        double value = (double)mantissa;
        if (mantissa != 0)
            value = power >= 0 ? value * POW10[power] : value / POW10[-power];
        *out = negative ? -value : value;
        return 0;
    }
    return parse_number(s, j, out, released);
}

#if defined(_MSC_VER)
#define THREAD_LOCAL __declspec(thread)
#define ALWAYS_INLINE __forceinline
#else
#define THREAD_LOCAL _Thread_local
#define ALWAYS_INLINE inline __attribute__((always_inline))
#endif
#define KEEP_AT_MOST (4 << 20) /* a bigger buffer (a whole log scanned at once) is freed after the call */

static void keep(Buffer *slot, Buffer *b) {
    if (b->cap > KEEP_AT_MOST) {
        PyMem_RawFree(b->data);
        *b = (Buffer){0};
    }
    *slot = *b;
}

static PyObject *as_bytes(Buffer *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->size); }

typedef struct {
    Buffer hashes, counts, starts, values, number_starts;
} Scanned;

/* scan's loop over the lines of s[0..n), the GIL released (*released), into `out`: 0, -1 with a Python
 * error from dtoa, -2 out of memory. With `simd` (a constant: the loop is compiled once for
 * SSSE3, text_run inlined in it, and once without) text is read 16 bytes at a time. */
static ALWAYS_INLINE int scan_lines(const unsigned char *s, Py_ssize_t n, int offsets,
                                                            Scanned *out, PyThreadState **released, const int simd) {
    unsigned char shape[SHAPE_FLUSH + 32] = {0};
    Py_ssize_t i = 0;
    while (i < n) {
        const Py_ssize_t line_start = i;
        const unsigned char *newline = memchr(s + i, '\n', (size_t)(n - i));
        const Py_ssize_t stop = newline ? newline - s : n;
        Lanes hash = {FNV_BASIS, FNV_BASIS ^ FNV_PRIME};
        int filled = 0; /* shape bytes in `shape` */
        uint32_t count = 0;
        int in_word = 0;
        while (i < stop) {
#ifdef SIMD_SCAN
            if (simd && i + 16 <= n) { /* text 16 bytes at a time, up to a number's start or the line's end */
                i = text_run(s, i, stop, n, &in_word, shape, &filled, &hash);
                if (i >= stop)
                    break;
            }
#endif
            const unsigned char c = s[i];
            const unsigned char kind = KIND[c];
            if (!in_word && (kind & NUMBER_START)) {
                Py_ssize_t len;
                int bare;
                double value;
                int bad = scan_number(s + i, stop - i, &len, &bare, &value, released);
                if (bad < 0)
                    return -1;
                if (bad == 0) {
                    PUSH(out->values, double, value);
                    if (offsets)
                        PUSH(out->number_starts, int64_t, (int64_t)i);
                    count++;
                    shape[filled++] = bare ? INTEGER_MARK : NUMBER_MARK;
                    if (filled >= SHAPE_FLUSH)
                        shape_flush(&hash, shape, &filled);
                    i += len;
                    in_word = 1;
                    continue;
                }
            }
            shape[filled] = c; /* a blank is written over by the next byte: left out */
            filled += !(kind & BLANK);
            if (filled >= SHAPE_FLUSH)
                shape_flush(&hash, shape, &filled);
            in_word = kind & WORD; /* a blank is no word byte */
            i++;
        }
        PUSH(out->hashes, uint64_t, shape_end(&hash, shape, filled));
        PUSH(out->counts, uint32_t, count);
        PUSH(out->starts, int64_t, (int64_t)line_start);
        if (i < n)
            i++; /* the newline */
    }
    return 0;
nomem_released:
    return -2;
}

#ifdef SIMD_SCAN
__attribute__((target("ssse3"))) static int scan_lines_ssse3(const unsigned char *s, Py_ssize_t n, int offsets,
                                                              Scanned *out, PyThreadState **released) {
    return scan_lines(s, n, offsets, out, released, 1);
}
#endif

static int scan_lines_bytes(const unsigned char *s, Py_ssize_t n, int offsets, Scanned *out,
                            PyThreadState **released) {
    return scan_lines(s, n, offsets, out, released, 0);
}

static PyObject *scan(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", "offsets", NULL};
    Py_buffer view;
    int offsets = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p:scan", keywords, &view, &offsets))
        return NULL;
    /* Each thread's buffers are kept from one call to the next (a reader scans a log block by block): no
     * realloc and first-touch page faults per block, which cost a fifth of the scan. */
    static THREAD_LOCAL Scanned kept;
    Scanned out = kept;
    out.hashes.size = out.counts.size = out.starts.size = out.values.size = out.number_starts.size = 0;
    PyObject *result = NULL;
    PyThreadState *released = PyEval_SaveThread();
    int status;
#ifdef SIMD_SCAN
    if (has_ssse3)
        status = scan_lines_ssse3(view.buf, view.len, offsets, &out, &released);
    else
#endif
        status = scan_lines_bytes(view.buf, view.len, offsets, &out, &released);
    PyEval_RestoreThread(released);
    if (status == 0)
        result = Py_BuildValue("(NNNNN)", as_bytes(&out.hashes), as_bytes(&out.counts), as_bytes(&out.starts),
                               as_bytes(&out.values), as_bytes(&out.number_starts));
    else if (status == -2)
        PyErr_NoMemory();
    keep(&kept.hashes, &out.hashes);
    keep(&kept.counts, &out.counts);
    keep(&kept.starts, &out.starts);
    keep(&kept.values, &out.values);
    keep(&kept.number_starts, &out.number_starts);
    PyBuffer_Release(&view);
    return result;
}
