// bench/json/parsers.cpp: the candidates for mw.json's parser, parse only (no Lua), on
// the messages of bench/json/codec.lua: RapidJSON's SAX reader (rapidjson-dev) as
// mw.json uses it (numbers as text, then Lua's rule: int64 or strtod) and simdjson's
// On-Demand API (libsimdjson-dev), visiting every value (numbers as int64 or double,
// strings unescaped), the message first copied into simdjson's padded buffer as a
// received frame would have to be.
//   g++ -O2 -std=c++17 bench/json/parsers.cpp -lsimdjson -o /tmp/parsers && /tmp/parsers FILE...
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace simdjson;

static size_t sink;

struct Counter {
    bool Null() { sink++; return true; }
    bool Bool(bool) { sink++; return true; }
    bool Int(int) { return false; }
    bool Uint(unsigned) { return false; }
    bool Int64(int64_t) { return false; }
    bool Uint64(uint64_t) { return false; }
    bool Double(double) { return false; }
    bool RawNumber(const char *s, rapidjson::SizeType n, bool) {
        if (memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n)) sink += (size_t)strtod(s, nullptr);
        else sink += (size_t)strtoll(s, nullptr, 10);
        return true;
    }
    bool String(const char *, rapidjson::SizeType n, bool) { sink += n; return true; }
    bool Key(const char *, rapidjson::SizeType n, bool) { sink += n; return true; }
    bool StartObject() { return true; }
    bool EndObject(rapidjson::SizeType) { return true; }
    bool StartArray() { return true; }
    bool EndArray(rapidjson::SizeType) { return true; }
};

static void rapid(const std::string &text) {
    rapidjson::MemoryStream stream(text.data(), text.size());
    Counter handler;
    rapidjson::Reader reader;
    reader.Parse<rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseStopWhenDoneFlag>(stream, handler);
}

static void visit(ondemand::value v) {
    switch (v.type()) {
    case ondemand::json_type::object:
        for (auto field : v.get_object()) {
            sink += field.unescaped_key().value().size();
            visit(field.value());
        }
        break;
    case ondemand::json_type::array:
        for (auto item : v.get_array()) visit(item.value());
        break;
    case ondemand::json_type::number: {
        ondemand::number_type t = v.get_number_type();
        if (t == ondemand::number_type::signed_integer) sink += (size_t)int64_t(v.get_int64());
        else sink += (size_t)double(v.get_double());
        break;
    }
    case ondemand::json_type::string: sink += v.get_string().value().size(); break;
    case ondemand::json_type::boolean: sink += bool(v.get_bool()); break;
    case ondemand::json_type::null: sink++; break;
    }
}

static ondemand::parser parser;

static void simd(const std::string &text) {
    padded_string padded(text);  // a frame's bytes are not padded: simdjson needs the copy
    ondemand::document doc = parser.iterate(padded);
    visit(doc.get_value());
}

template <typename F> static double ns_per(F f, const std::string &text) {
    size_t n = 1000;
    for (;;) {
        auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < n; i++) f(text);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 0.5) return s / n * 1e9;
        n *= 4;
    }
}

int main(int argc, char **argv) {
    printf("| message | RapidJSON SAX ns | simdjson On-Demand ns | simdjson / RapidJSON |\n|---|---|---|---|\n");
    for (int i = 1; i < argc; i++) {
        std::ifstream f(argv[i]);
        std::stringstream ss;
        ss << f.rdbuf();
        std::string text = ss.str();
        double best_r = 1e18, best_s = 1e18;
        for (int run = 0; run < 3; run++) {
            best_r = std::min(best_r, ns_per(rapid, text));
            best_s = std::min(best_s, ns_per(simd, text));
        }
        printf("| %zu B | %.0f | %.0f | %.2fx |\n", text.size(), best_r, best_s, best_s / best_r);
    }
    return sink == 42;
}
