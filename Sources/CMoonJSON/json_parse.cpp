// RapidJSON's SAX reader into mw.json's token tape (see CMoonJSON.h). No Lua here:
// nothing can longjmp through these frames.
#include "CMoonJSON.h"

#include <stdlib.h>
#include <string.h>

// RapidJSON's SSE2 scans are not used: in situ, Debian's 1.1.0 let a control character
// through inside a string of bytes >= 0x80 (found by the lua-json fuzz target), where
// mw.json must refuse it.
#include <rapidjson/internal/dtoa.h>
#include <rapidjson/reader.h>

namespace {

struct TapeHandler {
    mwj_tape *tape;
    bool nomem = false;

    mwj_token *next() {
        if (tape->count == tape->capacity) {
            size_t capacity = tape->capacity * 2;
            mwj_token *grown = tape->tokens == tape->inline_tokens
                ? static_cast<mwj_token *>(malloc(capacity * sizeof(mwj_token)))
                : static_cast<mwj_token *>(realloc(tape->tokens, capacity * sizeof(mwj_token)));
            if (grown == nullptr) {
                nomem = true;
                return nullptr;
            }
            if (tape->tokens == tape->inline_tokens) memcpy(grown, tape->inline_tokens, sizeof(tape->inline_tokens));
            tape->tokens = grown;
            tape->capacity = capacity;
        }
        return &tape->tokens[tape->count++];
    }

    bool scalar(uint32_t type) {
        mwj_token *t = next();
        if (t == nullptr) return false;
        t->type = type;
        return true;
    }

    bool Null() { return scalar(MWJ_NULL); }
    bool Bool(bool b) { return scalar(b ? MWJ_TRUE : MWJ_FALSE); }
    // kParseNumbersAsStringsFlag: every number comes through RawNumber.
    bool Int(int) { return false; }
    bool Uint(unsigned) { return false; }
    bool Int64(int64_t) { return false; }
    bool Uint64(uint64_t) { return false; }
    bool Double(double) { return false; }

    // Lua's own rule (lua_stringtonumber): an integer literal that fits in 64 bits is
    // an integer, anything else a float read by strtod.
    bool RawNumber(const char *s, rapidjson::SizeType length, bool) {
        mwj_token *t = next();
        if (t == nullptr) return false;
        bool integer = true;
        for (rapidjson::SizeType i = 0; i < length; i++) {
            if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') {
                integer = false;
                break;
            }
        }
        if (integer) {
            const char *p = s;
            bool negative = *p == '-';
            if (negative) p++;
            uint64_t a = 0;
            const uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
            for (; *p >= '0' && *p <= '9'; p++) {
                unsigned d = (unsigned)(*p - '0');
                if (a > (limit - d) / 10) {
                    integer = false;
                    break;
                }
                a = a * 10 + d;
            }
            if (integer) {
                t->type = MWJ_INT;
                t->v.i = negative ? (int64_t)(0 - a) : (int64_t)a;
                return true;
            }
        }
        t->type = MWJ_FLOAT;
        // In situ the number is not NUL-terminated, but what follows it in a text that
        // parses (',', ']', '}', white space or the copy's NUL) ends strtod's reading too.
        if (!exact_double(s, length, &t->v.d)) t->v.d = strtod(s, nullptr);
        return true;
    }

    // Clinger's fast path: with at most 15 significant digits the digits are an exact
    // double m, and for |e| <= 22 so is 10^e; one IEEE multiplication or division of two
    // exact values is correctly rounded, so m * 10^e (m / 10^-e) is what strtod returns.
    // False when the number is outside that (strtod decides).
    static bool exact_double(const char *s, size_t length, double *out) {
        static const double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        const char *p = s, *end = s + length;
        bool negative = *p == '-';
        if (negative) p++;
        uint64_t m = 0;
        int digits = 0, exp10 = 0;
        bool fraction = false;
        for (; p < end; p++) {
            char c = *p;
            if (c >= '0' && c <= '9') {
                if (m == 0 && c == '0') {
                    if (fraction) exp10--;  // a leading zero after the point
                    continue;
                }
                if (++digits > 15) return false;
                m = m * 10 + (uint64_t)(c - '0');
                if (fraction) exp10--;
            } else if (c == '.') {
                fraction = true;
            } else {
                break;  // 'e' or 'E'
            }
        }
        if (p < end) {
            p++;
            bool minus = *p == '-';
            if (*p == '-' || *p == '+') p++;
            int e = 0;
            for (; p < end; p++) {
                if (e > 10000) return false;
                e = e * 10 + (*p - '0');
            }
            exp10 += minus ? -e : e;
        }
        double d = (double)m;
        if (m == 0) {
            d = 0.0;
        } else if (exp10 >= 0 && exp10 <= 22) {
            d *= powers[exp10];
        } else if (exp10 < 0 && exp10 >= -22) {
            d /= powers[-exp10];
        } else {
            return false;
        }
        *out = negative ? -d : d;
        return true;
    }

    bool String(const char *s, rapidjson::SizeType length, bool) {
        mwj_token *t = next();
        if (t == nullptr) return false;
        if (tape->room - tape->used < length) {
            size_t room = tape->room * 2;
            while (room - tape->used < length) room *= 2;
            char *grown = tape->strings == tape->inline_strings ? static_cast<char *>(malloc(room))
                                                                : static_cast<char *>(realloc(tape->strings, room));
            if (grown == nullptr) {
                nomem = true;
                return false;
            }
            if (tape->strings == tape->inline_strings) memcpy(grown, tape->inline_strings, tape->used);
            tape->strings = grown;
            tape->room = room;
        }
        memcpy(tape->strings + tape->used, s, length);
        t->type = MWJ_STRING;
        t->len = length;
        t->v.off = tape->used;
        tape->used += length;
        return true;
    }

    bool Key(const char *s, rapidjson::SizeType length, bool copy) { return String(s, length, copy); }

    bool open(uint32_t type) {
        // json.lua refuses a container opened at depth 500 (its message comes from there).
        if (tape->depth >= MWJ_MAX_DEPTH) return false;
        mwj_token *t = next();
        if (t == nullptr) return false;
        t->type = type;
        tape->open[tape->depth++] = (uint32_t)(t - tape->tokens);
        if (tape->depth > tape->max_depth) tape->max_depth = tape->depth;
        return true;
    }

    bool close(rapidjson::SizeType count) {
        tape->tokens[tape->open[--tape->depth]].len = count;
        return true;
    }

    bool StartObject() { return open(MWJ_OBJECT); }
    bool EndObject(rapidjson::SizeType members) { return close(members); }
    bool StartArray() { return open(MWJ_ARRAY); }
    bool EndArray(rapidjson::SizeType items) { return close(items); }
};

}  // namespace

extern "C" void mwj_tape_init(mwj_tape *tape) {
    tape->tokens = tape->inline_tokens;
    tape->count = 0;
    tape->capacity = sizeof(tape->inline_tokens) / sizeof(tape->inline_tokens[0]);
    tape->strings = tape->inline_strings;
    tape->used = 0;
    tape->room = sizeof(tape->inline_strings);
    tape->depth = 0;
    tape->max_depth = 0;
}

extern "C" void mwj_tape_free(mwj_tape *tape) {
    if (tape->tokens != tape->inline_tokens) free(tape->tokens);
    if (tape->strings != tape->inline_strings) free(tape->strings);
    mwj_tape_init(tape);
}

extern "C" int mwj_parse(const char *text, size_t n, mwj_tape *tape) {
    // The reader's lengths are 32-bit; a raw DEL is a control character to json.lua.
    if (n > 0xFFFFFFFFu || memchr(text, 0x7F, n) != nullptr) return MWJ_FALLBACK;
    // Parsed in situ, in a NUL-terminated copy: strings are unescaped where they are
    // and numbers read where they are, not pushed onto the reader's stack (twice, for a
    // number) byte by byte; and RapidJSON scans an in-situ stream 16 bytes at a time.
    // A NUL byte in the text ends the stream early, as it did RapidJSON's MemoryStream:
    // the check for trailing text below sends it to the reference decoder.
    // RapidJSON's SSE2 scans load aligned 16-byte blocks, so the block holding the NUL
    // may reach 15 bytes past it: the copy has 16 bytes of zeros after the text.
    constexpr size_t pad = 16;
    char small[4096];
    char *copy = n + pad <= sizeof small ? small : static_cast<char *>(malloc(n + pad));
    if (copy == nullptr) return MWJ_NOMEM;
    memcpy(copy, text, n);
    memset(copy + n, 0, pad);
    rapidjson::InsituStringStream stream(copy);
    TapeHandler handler{tape};
    // The reader's own stack (only container bookkeeping in situ) in a buffer here, not
    // a malloc and free per message.
    char space[1024];
    rapidjson::MemoryPoolAllocator<> pool(space, sizeof space);
    rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>, rapidjson::MemoryPoolAllocator<>> reader(&pool, 256);
    constexpr unsigned flags =
        rapidjson::kParseInsituFlag | rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseStopWhenDoneFlag;
    rapidjson::ParseResult result = reader.Parse<flags>(stream, handler);
    if (copy != small) free(copy);
    if (handler.nomem) return MWJ_NOMEM;
    if (result.IsError()) return MWJ_FALLBACK;
    // Only white space may follow (a NUL byte ends RapidJSON's stream early).
    for (size_t at = stream.Tell(); at < n; at++) {
        char c = text[at];
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return MWJ_FALLBACK;
    }
    return MWJ_OK;
}

extern "C" int mwj_grisu2(double value, char *digits, int *k) {
    int length = 0;
    rapidjson::internal::Grisu2(value, digits, &length, k);
    return length;
}
