// `moonwire connect --json`: a received message re-indented by RapidJSON's reader and
// PrettyWriter, straight from the frame's bytes. Numbers pass through as their text
// (exact, whatever their size), keys stay in their order, strings are re-escaped
// (control characters as \u escapes, so a peer cannot drive the terminal).
#include "CMoonJSON.h"

#include <stdlib.h>
#include <string.h>

#include <rapidjson/memorystream.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>

namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

// Forwards every event to the writer and counts the depth, which the reader does not
// bound on its own (it recurses only in its non-iterative mode; this one is iterative).
struct PrettyHandler {
    Writer &out;
    int depth = 0;

    bool Null() { return out.Null(); }
    bool Bool(bool b) { return out.Bool(b); }
    bool Int(int) { return false; }
    bool Uint(unsigned) { return false; }
    bool Int64(int64_t) { return false; }
    bool Uint64(uint64_t) { return false; }
    bool Double(double) { return false; }
    // Writer::RawNumber would quote it: the text goes out as a raw value.
    bool RawNumber(const char *s, rapidjson::SizeType n, bool) { return out.RawValue(s, n, rapidjson::kNumberType); }
    bool String(const char *s, rapidjson::SizeType n, bool) { return out.String(s, n); }
    bool Key(const char *s, rapidjson::SizeType n, bool) { return out.Key(s, n); }
    bool StartObject() { return ++depth <= MWJ_MAX_DEPTH && out.StartObject(); }
    bool EndObject(rapidjson::SizeType n) { --depth; return out.EndObject(n); }
    bool StartArray() { return ++depth <= MWJ_MAX_DEPTH && out.StartArray(); }
    bool EndArray(rapidjson::SizeType n) { --depth; return out.EndArray(n); }
};

} // namespace

extern "C" int mwj_pretty(const char *text, size_t n, char **out, size_t *count) {
    *out = nullptr;
    *count = 0;
    size_t i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == n || (text[i] != '{' && text[i] != '[')) return MWJ_FALLBACK;
    rapidjson::StringBuffer buffer;
    Writer writer(buffer);
    writer.SetIndent(' ', 2);
    PrettyHandler handler{writer};
    rapidjson::MemoryStream stream(text, n);
    rapidjson::Reader reader;
    constexpr unsigned flags = rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag
        | rapidjson::kParseValidateEncodingFlag;
    if (reader.Parse<flags>(stream, handler).IsError()) return MWJ_FALLBACK;
    size_t size = buffer.GetSize();
    char *copy = static_cast<char *>(malloc(size + 1));
    if (copy == nullptr) return MWJ_NOMEM;
    memcpy(copy, buffer.GetString(), size);
    copy[size] = '\0';
    *out = copy;
    *count = size;
    return MWJ_OK;
}
