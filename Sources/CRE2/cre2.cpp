// RE2 behind the C API of cre2.h. No exception crosses into C: an allocation that fails
// while compiling is a pattern that cannot be compiled.

#include "cre2.h"

#include <cstring>
#include <new>
#include <string>

#include <re2/re2.h>

struct cre2_pattern {
    re2::RE2 expression;
    cre2_pattern(const re2::StringPiece &text, const re2::RE2::Options &options) : expression(text, options) {}
};

namespace {

void copy_error(const std::string &message, char *error, size_t error_size) {
    if (error == nullptr || error_size == 0) return;
    size_t length = message.size() < error_size - 1 ? message.size() : error_size - 1;
    std::memcpy(error, message.data(), length);
    error[length] = '\0';
}

}  // namespace

extern "C" cre2_pattern *cre2_compile(const char *pattern, size_t length, long long max_memory, char *error, size_t error_size) {
    re2::RE2::Options options;
    options.set_encoding(re2::RE2::Options::EncodingUTF8);
    options.set_log_errors(false);
    options.set_never_capture(true);
    options.set_max_mem(max_memory);
    cre2_pattern *compiled = nullptr;
    try {
        compiled = new cre2_pattern(re2::StringPiece(pattern, length), options);
    } catch (...) {
        copy_error("out of memory", error, error_size);
        return nullptr;
    }
    if (!compiled->expression.ok()) {
        copy_error(compiled->expression.error(), error, error_size);
        delete compiled;
        return nullptr;
    }
    return compiled;
}

extern "C" int cre2_search(const cre2_pattern *pattern, const char *text, size_t length) {
    return re2::RE2::PartialMatch(re2::StringPiece(text, length), pattern->expression) ? 1 : 0;
}

extern "C" int cre2_program_size(const cre2_pattern *pattern) { return pattern->expression.ProgramSize(); }

extern "C" void cre2_free(cre2_pattern *pattern) { delete pattern; }
