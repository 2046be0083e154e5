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

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

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

/* The length of the number at s[0..n) (0 when none starts there). */
static Py_ssize_t number_length(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t j = 0;
    if (s[0] == '+' || s[0] == '-')
        j = 1;
    Py_ssize_t digits = 0;
    while (j < n && is_digit(s[j])) {
        j++;
        digits++;
    }
    if (j < n && s[j] == '.' && (digits || (j + 1 < n && is_digit(s[j + 1])))) {
        j++;
        while (j < n && is_digit(s[j])) {
            j++;
            digits++;
        }
    }
    if (!digits)
        return 0;
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
        Py_ssize_t k = j + 1;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        if (k < n && is_digit(s[k])) {
            while (k < n && is_digit(s[k]))
                k++;
            j = k;
        }
    }
    return j;
}

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 u128;

static int bit_length(u128 x) {
    uint64_t high = (uint64_t)(x >> 64), low = (uint64_t)x;
    return high ? 128 - __builtin_clzll(high) : low ? 64 - __builtin_clzll(low) : 0;
}

/* q * 2**exp2 rounded to the nearest double, ties to even; `sticky`: the exact value is a little above
 * q * 2**exp2 (a non-zero remainder). q has at least 54 bits. */
static double round_wide(u128 q, int exp2, int sticky) {
    int shift = bit_length(q) - 53;
    uint64_t kept = (uint64_t)(q >> shift);
    u128 rest = q & (((u128)1 << shift) - 1), half = (u128)1 << (shift - 1);
    if (rest > half || (rest == half && (sticky || (kept & 1))))
        kept++;
    if (kept >> 53) {
        kept >>= 1;
        shift++;
    }
    return ldexp((double)kept, exp2 + shift);
}

/* mantissa * 10**power correctly rounded, for mantissas of up to 19 digits and powers in -21..19, in
 * 128-bit integers (exact: a product, or a quotient with its remainder); 0 outside that range. */
static int exact_wide(uint64_t mantissa, int power, double *out) {
    if (mantissa == 0 || power < -21 || power > 19)
        return 0;
    u128 scale = 1;
    for (int k = 0; k < (power < 0 ? -power : power); k++)
        scale *= 10;
    if (power >= 0) {
        u128 product = (u128)mantissa * scale; /* < 2**64 * 10**19 < 2**128 */
        if (bit_length(product) < 54) {
            *out = (double)product; /* exact */
            return 1;
        }
        *out = round_wide(product, 0, 0);
        return 1;
    }
    int lift = 127 - bit_length((u128)mantissa);
    u128 numerator = (u128)mantissa << lift; /* top bit set: the quotient has >= 56 bits (10**21 < 2**70) */
    *out = round_wide(numerator / scale, -lift, numerator % scale != 0);
    return 1;
}
#endif

/* The double of s[0..len), always the one float() gives: at most 15 significant digits and a power of ten
 * within 22, one correctly rounded multiplication or division of two exact doubles; up to 19 digits, exact
 * 128-bit integer arithmetic (where the compiler has it); else Python's own dtoa, with the GIL. */
static int parse_number(const unsigned char *s, Py_ssize_t len, double *out, PyThreadState **released) {
    Py_ssize_t j = 0;
    int negative = 0;
    if (s[0] == '+' || s[0] == '-') {
        negative = s[0] == '-';
        j = 1;
    }
    uint64_t mantissa = 0;
    int significant = 0, scale = 0, leading = 1;
    for (; j < len && s[j] != 'e' && s[j] != 'E'; j++) {
        if (s[j] == '.') {
            for (j++; j < len && is_digit(s[j]); j++) {
                if (leading && s[j] == '0') {
                    scale--;
                    continue;
                }
                leading = 0;
                mantissa = mantissa * 10 + (uint64_t)(s[j] - '0');
                significant++;
                scale--;
            }
            break;
        }
        if (leading && s[j] == '0')
            continue;
        leading = 0;
        mantissa = mantissa * 10 + (uint64_t)(s[j] - '0');
        significant++;
        if (significant > 19)
            break;
    }
    int exponent = 0, exp_negative = 0, exp_digits = 0;
    if (j < len && (s[j] == 'e' || s[j] == 'E')) {
        j++;
        if (j < len && (s[j] == '+' || s[j] == '-')) {
            exp_negative = s[j] == '-';
            j++;
        }
        for (; j < len; j++) {
            if (exp_digits < 6)
                exponent = exponent * 10 + (s[j] - '0');
            exp_digits++;
        }
    }
    if (j == len && significant <= 19 && exp_digits <= 6) {
        int power = scale + (exp_negative ? -exponent : exponent);
        double value = (double)mantissa;
        if (significant <= 15 && (mantissa == 0 || (power >= -22 && power <= 22))) {
            if (mantissa != 0)
                value = power >= 0 ? value * POW10[power] : value / POW10[-power];
            *out = negative ? -value : value;
            return 0;
        }
#ifdef __SIZEOF_INT128__
        if (exact_wide(mantissa, power, &value)) {
            *out = negative ? -value : value;
            return 0;
        }
#endif
    }
    char text[MAX_NUMBER + 1];
    memcpy(text, s, (size_t)len);
    text[len] = '\0';
    char *end = NULL;
    PyEval_RestoreThread(*released);
    double value = PyOS_string_to_double(text, &end, NULL);
    int failed = value == -1.0 && PyErr_Occurred();
    *released = PyEval_SaveThread();
    if (failed)
        return -1;
    if (end != text + len)
        return 1;
    *out = value;
    return 0;
}

static PyObject *as_bytes(Buffer *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->size); }

static PyObject *scan(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", "offsets", NULL};
    Py_buffer view;
    int offsets = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p:scan", keywords, &view, &offsets))
        return NULL;
    const unsigned char *s = view.buf;
    const Py_ssize_t n = view.len;
    Buffer hashes = {0}, counts = {0}, starts = {0}, values = {0}, number_starts = {0};
    PyObject *result = NULL;
    Py_ssize_t i = 0;
    int failed = 0;
    PyThreadState *released = PyEval_SaveThread();
    while (i < n) {
        const Py_ssize_t line_start = i;
        uint64_t hash = FNV_BASIS;
        uint32_t count = 0;
        int in_word = 0;
        while (i < n && s[i] != '\n') {
            const unsigned char c = s[i];
            const unsigned char kind = KIND[c];
            if (kind & BLANK) {
                in_word = 0;
                i++;
                continue;
            }
            if (!in_word && (kind & NUMBER_START)) {
                Py_ssize_t len = number_length(s + i, n - i);
                if (len > 0 && len <= MAX_NUMBER) {
                    double value;
                    int bad = parse_number(s + i, len, &value, &released);
                    if (bad < 0) {
                        failed = 1;
                        goto done_scanning;
                    }
                    if (bad == 0) {
                        PUSH(values, double, value);
                        if (offsets)
                            PUSH(number_starts, int64_t, (int64_t)i);
                        count++;
                        int bare = 1;
                        for (Py_ssize_t k = 0; k < len; k++)
                            bare &= is_digit(s[i + k]);
                        hash = (hash ^ (bare ? INTEGER_MARK : NUMBER_MARK)) * FNV_PRIME;
                        i += len;
                        in_word = 1;
                        continue;
                    }
                }
            }
            hash = (hash ^ c) * FNV_PRIME;
            in_word = kind & WORD;
            i++;
        }
        PUSH(hashes, uint64_t, hash);
        PUSH(counts, uint32_t, count);
        PUSH(starts, int64_t, (int64_t)line_start);
        if (i < n)
            i++; /* the newline */
    }
done_scanning:
    PyEval_RestoreThread(released);
    if (failed)
        goto fail;
    result = Py_BuildValue("(NNNNN)", as_bytes(&hashes), as_bytes(&counts), as_bytes(&starts), as_bytes(&values),
                           as_bytes(&number_starts));
    goto done;
nomem_released:
    PyEval_RestoreThread(released);
    PyErr_NoMemory();
fail:
    result = NULL;
done:
    PyMem_RawFree(hashes.data);
    PyMem_RawFree(counts.data);
    PyMem_RawFree(starts.data);
    PyMem_RawFree(values.data);
    PyMem_RawFree(number_starts.data);
    PyBuffer_Release(&view);
    return result;
}

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

/* Whether t[0..len) is a number float() reads: [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)? */
static int float_syntax(const unsigned char *t, Py_ssize_t len) {
    Py_ssize_t j = 0, digits = 0;
    if (j < len && (t[j] == '+' || t[j] == '-'))
        j++;
    for (; j < len && is_digit(t[j]); j++)
        digits++;
    if (j < len && t[j] == '.')
        for (j++; j < len && is_digit(t[j]); j++)
            digits++;
    if (!digits)
        return 0;
    if (j < len && (t[j] == 'e' || t[j] == 'E')) {
        j++;
        if (j < len && (t[j] == '+' || t[j] == '-'))
            j++;
        Py_ssize_t exp_digits = 0;
        for (; j < len && is_digit(t[j]); j++)
            exp_digits++;
        if (!exp_digits)
            return 0;
    }
    return j == len;
}

static int all_digits(const unsigned char *t, Py_ssize_t len) {
    if (len == 0)
        return 0;
    for (Py_ssize_t j = 0; j < len; j++)
        if (!is_digit(t[j]))
            return 0;
    return 1;
}

static int64_t two_digits(const unsigned char *t) { return (t[0] - '0') * 10 + (t[1] - '0'); }

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* One token read by its kind into *out; 0 when it does not read. */
static int read_token(const unsigned char *token, Py_ssize_t len, char kind, int drop_commas, double *out,
                      PyThreadState **released) {
    unsigned char text[MAX_NUMBER + 1];
    Py_ssize_t n = 0;
    if (len > MAX_NUMBER)
        return 0;
    if (kind == 'r' && drop_commas) { /* mpirun's [1,0]: the local rank is the last number */
        Py_ssize_t cut = len;
        while (cut > 0 && token[cut - 1] != ',')
            cut--;
        token += cut;
        len -= cut;
        drop_commas = 0;
    }
    for (Py_ssize_t j = 0; j < len; j++) {
        unsigned char c = token[j];
        if (c == ',' && (drop_commas || kind == 's')) {
            if (kind == 's')
                text[n++] = '.';
            continue;
        }
        text[n++] = c;
    }
    switch (kind) {
    case 'f':
    case 's':
        return float_syntax(text, n) && parse_number(text, n, out, released) == 0;
    case 'i': {
        Py_ssize_t j = (n > 0 && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
        if (!all_digits(text + j, n - j) || n - j > 15)
            return 0;
        return parse_number(text, n, out, released) == 0;
    }
    case 'r':
        if (!all_digits(text, n) || (n > 1 && text[0] == '0') || n > 15)
            return 0;
        return parse_number(text, n, out, released) == 0;
    case 'h':
    case 'm':
        if (n != 2 || !all_digits(text, 2))
            return 0;
        *out = (double)two_digits(text);
        return 1;
    case 'd': {
        if (n != 10 || !all_digits(text, 4) || text[4] != '-' || !all_digits(text + 5, 2) || text[7] != '-' ||
            !all_digits(text + 8, 2))
            return 0;
        int64_t year = two_digits(text) * 100 + two_digits(text + 2), month = two_digits(text + 5);
        if (year < 1 || month < 1 || month > 12)
            return 0;
        *out = (double)days_from_civil(year, month, two_digits(text + 8));
        return 1;
    }
    }
    return 0;
}

#ifdef __SIZEOF_INT128__
static u128 POW10_WIDE[23]; /* 10**k as 128-bit integers */

/* m / 10**k correctly rounded, for m above 2**53 (below 2**64) and k in 1..22, without a division of
 * 128-bit integers: the quotient of the two doubles is within an ulp or so, and a candidate M 2**e is the
 * one float() gives when m / 10**k lies strictly between the midpoints around it: (2M - 1) 10**k <
 * m 2**(1 - e) < (2M + 1) 10**k (products below 2**128); else its neighbour on that side is checked. 0 when
 * that does not decide (a tie, a binade's edge, two ulps off): exact_wide then does. */
static int near_quotient(uint64_t m, int k, double *out) {
    const double c = (double)m / POW10[k];
    uint64_t bits;
    memcpy(&bits, &c, sizeof bits);
    const int biased = (int)(bits >> 52) & 0x7ff;
    const uint64_t low_bits = ((uint64_t)1 << 52) - 1;
    uint64_t M = (bits & low_bits) | ((uint64_t)1 << 52);
    const int shift = 1 - (biased - 1075);
    if (biased == 0 || shift < 0 || shift > 63 + __builtin_clzll(m))
        return 0;
    const u128 scaled = (u128)m << shift;
    for (int tries = 0; tries < 2; tries++) { /* the candidate, then its neighbour on the side the check says */
        if (M == (uint64_t)1 << 52 || M == (uint64_t)1 << 53)
            return 0;
        const u128 below = (u128)(2 * M - 1) * POW10_WIDE[k], above = (u128)(2 * M + 1) * POW10_WIDE[k];
        if (scaled > below && scaled < above) {
            bits = ((uint64_t)biased << 52) | (M & low_bits);
            memcpy(out, &bits, sizeof bits);
            return 1;
        }
        if (scaled == below || scaled == above)
            return 0; /* a tie */
        M = scaled > above ? M + 1 : M - 1;
    }
    return 0;
}
#endif

/* Whether t[0..8) are 8 digits, and their value (a fraction's digits 8 at a time, as one number). */
static inline int eight_digits(const unsigned char *t, uint64_t *out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, t, 8);
    if ((v & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL ||
        ((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL)
        return 0;
    v = (v & 0x0F0F0F0F0F0F0F0FULL) * 2561 >> 8; /* pairs, then fours, then the eight */
    v = (v & 0x00FF00FF00FF00FFULL) * 6553601 >> 16;
    *out = (uint32_t)((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL >> 32);
    return 1;
#else
    (void)t;
    (void)out;
    return 0;
#endif
}

static inline int leading_zeros(const unsigned char *t) {
    int k = 0;
    while (k < 8 && t[k] == '0')
        k++;
    return k;
}

/* A token read by kind `f` or `i` without commas to drop, on its common forms (at most 19 significant
 * digits, a power of ten within 22, at most MAX_NUMBER bytes): 1 and the double read_token gives; 0 when
 * read_token must decide (it gives the same where this gives one). One pass over the bytes, no copy. */
static inline int quick_number(const unsigned char *t, Py_ssize_t len, char kind, double *out) {
    Py_ssize_t j = 0;
    int negative = 0, significant = 0, digits = 0, power = 0;
    uint64_t mantissa = 0;
    if (len > MAX_NUMBER)
        return 0;
    if (j < len && (t[j] == '+' || t[j] == '-')) {
        negative = t[j] == '-';
        j++;
    }
    for (; j < len && is_digit(t[j]); j++, digits++) {
        if (mantissa == 0 && t[j] == '0')
            continue; /* a leading zero */
        if (significant++ == 19)
            return 0;
        mantissa = mantissa * 10 + (uint64_t)(t[j] - '0');
    }
    if (kind == 'i') { /* read_token's: [+-]? and at most 15 digits, all of them */
        if (j != len || digits == 0 || digits > 15)
            return 0;
        *out = negative ? -(double)mantissa : (double)mantissa;
        return 1;
    }
    if (j < len && t[j] == '.') {
        uint64_t eight;
        for (j++; significant <= 11 && j + 8 <= len && eight_digits(t + j, &eight); j += 8, digits += 8, power -= 8) {
            significant += mantissa ? 8 : eight ? 8 - leading_zeros(t + j) : 0; /* 8 a step: a long fraction */
            mantissa = mantissa * 100000000 + eight;
        }
        for (; j < len && is_digit(t[j]); j++, digits++, power--) {
            if (mantissa == 0 && t[j] == '0')
                continue;
            if (significant++ == 19)
                return 0;
            mantissa = mantissa * 10 + (uint64_t)(t[j] - '0');
        }
    }
    if (digits == 0)
        return 0;
    if (j < len && (t[j] == 'e' || t[j] == 'E')) {
        int exp_negative = 0, exponent = 0, exp_digits = 0;
        j++;
        if (j < len && (t[j] == '+' || t[j] == '-')) {
            exp_negative = t[j] == '-';
            j++;
        }
        for (; j < len && is_digit(t[j]); j++) {
            if (++exp_digits > 4)
                return 0;
            exponent = exponent * 10 + (t[j] - '0');
        }
        if (exp_digits == 0)
            return 0;
        power += exp_negative ? -exponent : exponent;
    }
    if (j != len)
        return 0;
    double value = 0.0;
    if (mantissa != 0) {
        if (power < -22 || power > 22)
            return 0;
        if (mantissa <= (uint64_t)1 << 53) /* both exact: one correctly rounded operation */
            value = power >= 0 ? (double)mantissa * POW10[power] : (double)mantissa / POW10[-power];
#ifdef __SIZEOF_INT128__
        else if (power >= 0 || !near_quotient(mantissa, -power, &value))
            return 0;
#else
        else
            return 0;
#endif
    }
    *out = negative ? -value : value;
    return 1;
}

#if defined(__SSE2__) && defined(__GNUC__)
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
    PyObject *result = NULL;
    Buffer out = {0};
    int32_t *pick_of = NULL;
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
    result = Py_BuildValue("(nN)", lines, as_bytes(&out));
release:
    PyMem_Free(pick_of);
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
    Py_ssize_t found = 0;
    while (found < count && at < n) {
        const char *nl = memchr(s + at, '\n', (size_t)(n - at));
        if (nl == NULL)
            break;
        at = (Py_ssize_t)(nl - s) + 1;
        if (out != NULL)
            out[found] = (int64_t)at;
        found++;
    }
    *end = at;
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

#if defined(__GNUC__) && defined(__x86_64__)
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
#ifdef __SIZEOF_INT128__
    POW10_WIDE[0] = 1;
    for (int k = 1; k < 23; k++)
        POW10_WIDE[k] = POW10_WIDE[k - 1] * 10;
#endif
    init_shape();
#ifdef SIMD_SHAPES
    init_pack();
#endif
    return PyModule_Create(&module);
}
