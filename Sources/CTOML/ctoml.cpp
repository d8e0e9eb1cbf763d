// toml++ (header-only, without exceptions: see Package.swift) behind the C API of ctoml.h.

#include "ctoml.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

struct ctoml_document {
    toml::table root;
    std::vector<ctoml_node> nodes;
    // Date-time texts made here; a deque never moves what it holds, so their pointers stay valid.
    std::deque<std::string> texts;
    std::string error;
    bool failed = false;
    uint32_t error_line = 0;
    uint32_t error_column = 0;
};

namespace {

std::string two_digits(unsigned value) {
    char buffer[4];
    std::snprintf(buffer, sizeof buffer, "%02u", value % 100);
    return buffer;
}

std::string date_text(const toml::date &date) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "%04u-", static_cast<unsigned>(date.year) % 10000);
    return buffer + two_digits(date.month) + "-" + two_digits(date.day);
}

std::string time_text(const toml::time &time) {
    std::string text = two_digits(time.hour) + ":" + two_digits(time.minute) + ":" + two_digits(time.second);
    if (time.nanosecond != 0) {
        char buffer[16];
        std::snprintf(buffer, sizeof buffer, ".%09u", static_cast<unsigned>(time.nanosecond));
        std::string fraction = buffer;
        fraction.erase(fraction.find_last_not_of('0') + 1);
        text += fraction;
    }
    return text;
}

std::string offset_text(const toml::time_offset &offset) {
    if (offset.minutes == 0) return "Z";
    int minutes = offset.minutes < 0 ? -offset.minutes : offset.minutes;
    return std::string(offset.minutes < 0 ? "-" : "+") + two_digits(static_cast<unsigned>(minutes / 60)) + ":"
        + two_digits(static_cast<unsigned>(minutes % 60));
}

uint32_t position(toml::source_index index) {
    return static_cast<uint32_t>(index);
}

void flatten(ctoml_document &document, const toml::node &node, const toml::key *key) {
    ctoml_node flat{};
    const toml::source_position &begin = key ? key->source().begin : node.source().begin;
    flat.line = position(begin.line);
    flat.column = position(begin.column);
    if (key) {
        flat.key = key->str().data();
        flat.key_length = key->str().size();
    }
    switch (node.type()) {
    case toml::node_type::table: {
        flat.kind = CTOML_TABLE;
        const toml::table &table = *node.as_table();
        std::vector<std::pair<const toml::key *, const toml::node *>> members;
        members.reserve(table.size());
        for (auto &&[member_key, value] : table) members.emplace_back(&member_key, &value);
        // toml++ keeps a table sorted by key; the reader wants the order it was written in.
        // Sibling keys never share a position, so a plain sort is stable enough.
        std::sort(members.begin(), members.end(), [](const auto &a, const auto &b) {
            const toml::source_position &left = a.first->source().begin;
            const toml::source_position &right = b.first->source().begin;
            return left.line != right.line ? left.line < right.line : left.column < right.column;
        });
        flat.children = members.size();
        document.nodes.push_back(flat);
        for (const auto &[member_key, value] : members) flatten(document, *value, member_key);
        return;
    }
    case toml::node_type::array: {
        flat.kind = CTOML_ARRAY;
        const toml::array &array = *node.as_array();
        flat.children = array.size();
        document.nodes.push_back(flat);
        for (const toml::node &element : array) flatten(document, element, nullptr);
        return;
    }
    case toml::node_type::string: {
        flat.kind = CTOML_STRING;
        const std::string &text = node.as_string()->get();
        flat.text = text.data();
        flat.text_length = text.size();
        break;
    }
    case toml::node_type::integer:
        flat.kind = CTOML_INTEGER;
        flat.integer = node.as_integer()->get();
        break;
    case toml::node_type::floating_point:
        flat.kind = CTOML_FLOAT;
        flat.floating = node.as_floating_point()->get();
        break;
    case toml::node_type::boolean:
        flat.kind = CTOML_BOOLEAN;
        flat.boolean = node.as_boolean()->get();
        break;
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time:
    case toml::node_type::none: {
        flat.kind = CTOML_DATE_TIME;
        std::string text;
        if (const auto *date = node.as_date()) {
            text = date_text(date->get());
        } else if (const auto *time = node.as_time()) {
            text = time_text(time->get());
        } else if (const auto *date_time = node.as_date_time()) {
            const toml::date_time &value = date_time->get();
            text = date_text(value.date) + "T" + time_text(value.time);
            if (value.offset) text += offset_text(*value.offset);
        }
        const std::string &stored = document.texts.emplace_back(std::move(text));
        flat.text = stored.data();
        flat.text_length = stored.size();
        break;
    }
    }
    document.nodes.push_back(flat);
}

} // namespace

extern "C" ctoml_document *ctoml_parse(const char *text, size_t length) {
    ctoml_document *document = new (std::nothrow) ctoml_document();
    if (!document) return nullptr;
    try {
        toml::parse_result result = toml::parse(std::string_view(text, length));
        if (!result) {
            const toml::parse_error &error = result.error();
            document->failed = true;
            document->error = std::string(error.description());
            document->error_line = position(error.source().begin.line);
            document->error_column = position(error.source().begin.column);
            return document;
        }
        document->root = std::move(result).table();
        flatten(*document, document->root, nullptr);
        return document;
    } catch (const std::bad_alloc &) {
        delete document;
        return nullptr;
    }
}

extern "C" const char *ctoml_error(const ctoml_document *document, uint32_t *line, uint32_t *column) {
    if (!document->failed) return nullptr;
    if (line) *line = document->error_line;
    if (column) *column = document->error_column;
    return document->error.c_str();
}

extern "C" const ctoml_node *ctoml_nodes(const ctoml_document *document, size_t *count) {
    *count = document->nodes.size();
    return document->failed ? nullptr : document->nodes.data();
}

extern "C" void ctoml_free(ctoml_document *document) {
    delete document;
}
