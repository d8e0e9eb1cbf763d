#ifndef CTOML_H
#define CTOML_H

// A C view of a TOML document parsed by toml++, for Swift: the whole tree in one flat
// array, read once and then freed. The C++ parser stays behind this header.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CTOML_TABLE,
    CTOML_ARRAY,
    CTOML_STRING,
    CTOML_INTEGER,
    CTOML_FLOAT,
    CTOML_BOOLEAN,
    /// A local date, local time, local date-time or offset date-time, as RFC 3339 text.
    CTOML_DATE_TIME,
} ctoml_kind;

/// One value. The nodes are in pre-order: a table or array is followed by its `children`
/// direct children, each with its own subtree. A table's children come in document order.
typedef struct {
    ctoml_kind kind;
    /// Where it was written, from 1: a table member's key, otherwise the value.
    uint32_t line;
    uint32_t column;
    /// A table member's key (UTF-8, may hold NUL); NULL for the root and array elements.
    const char *key;
    size_t key_length;
    /// CTOML_STRING and CTOML_DATE_TIME: the text (UTF-8, may hold NUL).
    const char *text;
    size_t text_length;
    int64_t integer;
    double floating;
    bool boolean;
    size_t children;
} ctoml_node;

typedef struct ctoml_document ctoml_document;

/// Parses `length` bytes of UTF-8. NULL only when memory ran out; otherwise free the
/// result with ctoml_free whether or not parsing failed.
ctoml_document *ctoml_parse(const char *text, size_t length);

/// The parser's message when the text is not valid TOML, else NULL; `line` and `column`
/// (from 1) say where.
const char *ctoml_error(const ctoml_document *document, uint32_t *line, uint32_t *column);

/// The tree: node 0 is the root table. NULL (count 0) when parsing failed.
const ctoml_node *ctoml_nodes(const ctoml_document *document, size_t *count);

void ctoml_free(ctoml_document *document);

#ifdef __cplusplus
}
#endif

#endif
