/* The log readers' native line scanner (optional: stethoscope/importers/linescan.py says when it is used).
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
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

/* The double of s[0..len): exact when the significand has at most 15 digits and the power of ten is at
 * most 22 (one correctly rounded multiplication or division of two exact doubles), else Python's dtoa. */
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
    if (j == len && significant <= 15 && exp_digits <= 6) {
        int power = scale + (exp_negative ? -exponent : exponent);
        double value = (double)mantissa;
        if (mantissa == 0 || (power >= 0 && power <= 22) || (power < 0 && power >= -22)) {
            if (mantissa != 0)
                value = power >= 0 ? value * POW10[power] : value / POW10[-power];
            *out = negative ? -value : value;
            return 0;
        }
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

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS,
     "scan(data, offsets=False) -> (hashes, counts, starts, values, number_starts): see the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan", "The log readers' native line scanner.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__linescan(void) {
    init_kinds();
    return PyModule_Create(&module);
}
