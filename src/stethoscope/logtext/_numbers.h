/* How the native line scanner reads numbers (included by _linescan.c, which says what it reads and where).
 *
 * parse_number gives the double that Python's float() gives for a number's text: at most 15 significant
 * digits and a power of ten within 22, one correctly rounded operation on two exact doubles; up to 19
 * digits, exact 128-bit integer arithmetic (where the compiler has it); else Python's own dtoa, with the
 * GIL. read_token reads a token of columns' by its kind (float, int, rank, date, hour, minute, seconds);
 * quick_number is its fast path for floats and ints in one pass over the bytes (a long fraction's digits 8
 * at a time; m / 10**k for m above 2**53 checked in 128-bit integers, near_quotient, not divided in them),
 * always the double read_token gives, or 0 to let it decide.
 */

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }


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

static void init_numbers(void) {
#ifdef __SIZEOF_INT128__
    POW10_WIDE[0] = 1;
    for (int k = 1; k < 23; k++)
        POW10_WIDE[k] = POW10_WIDE[k - 1] * 10;
#endif
}
