import CCmarkGFM

/// Markdown as cmark-gfm parses it (CommonMark with GitHub's tables, strikethrough and
/// autolinks), copied into Swift values: no other module sees a C pointer of it.
///
/// Strings here are exactly what the parser produced, entities decoded: they may hold
/// control characters (`&#27;` is an ESC), so whoever shows them makes them safe first.
public indirect enum Inline: Equatable, Sendable {
    case text(String)
    case code(String)
    case emphasis([Inline])
    case strong([Inline])
    case strikethrough([Inline])
    case link(destination: String, [Inline])
    case image(source: String, [Inline])
    case softBreak
    case lineBreak
    case html(String)
}

public enum TableAlignment: Equatable, Sendable {
    case none, left, center, right
}

public indirect enum Block: Equatable, Sendable {
    case paragraph([Inline])
    case heading(level: Int, [Inline])
    /// A fenced or indented code block; `language` is the fence's first word, or empty.
    case code(language: String, text: String)
    case quote([Block])
    case list(ordered: Bool, start: Int, tight: Bool, items: [[Block]])
    /// Rows of cells; the first row is the header.
    case table(alignments: [TableAlignment], rows: [[[Inline]]])
    case rule
    case html(String)
}

/// A top-level block and the line of the text it starts on (1 for the first).
public struct LocatedBlock: Equatable, Sendable {
    public let block: Block
    public let line: Int
}

public enum Markdown {
    /// The top-level blocks of `text`, in order.
    public static func parse(_ text: String) -> [LocatedBlock] {
        _ = extensionsRegistered
        guard let parser = cmark_parser_new(CMARK_OPT_DEFAULT) else { return [] }
        defer { cmark_parser_free(parser) }
        for name in ["table", "strikethrough", "autolink"] {
            if let syntax = cmark_find_syntax_extension(name) {
                _ = cmark_parser_attach_syntax_extension(parser, syntax)
            }
        }
        var text = text
        text.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { cmark_parser_feed(parser, $0.baseAddress, $0.count) }
        }
        guard let document = cmark_parser_finish(parser) else { return [] }
        defer { cmark_node_free(document) }
        return children(of: document).compactMap { node in
            block(node).map { LocatedBlock(block: $0, line: Int(cmark_node_get_start_line(node))) }
        }
    }

    /// The extensions' registry is global to the library: filled once per process.
    private static let extensionsRegistered: Void = cmark_gfm_core_extensions_ensure_registered()

    private static func children(of node: OpaquePointer) -> [OpaquePointer] {
        var result: [OpaquePointer] = []
        var child = cmark_node_first_child(node)
        while let current = child {
            result.append(current)
            child = cmark_node_next(current)
        }
        return result
    }

    private static func string(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    private static func typeName(_ node: OpaquePointer) -> String {
        string(cmark_node_get_type_string(node))
    }

    private static func blocks(in node: OpaquePointer) -> [Block] {
        children(of: node).compactMap(block)
    }

    private static func block(_ node: OpaquePointer) -> Block? {
        switch cmark_node_get_type(node) {
        case CMARK_NODE_PARAGRAPH:
            return .paragraph(inlines(in: node))
        case CMARK_NODE_HEADING:
            return .heading(level: Int(cmark_node_get_heading_level(node)), inlines(in: node))
        case CMARK_NODE_CODE_BLOCK:
            let info = string(cmark_node_get_fence_info(node))
            let language = info.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init) ?? ""
            return .code(language: language, text: string(cmark_node_get_literal(node)))
        case CMARK_NODE_BLOCK_QUOTE:
            return .quote(blocks(in: node))
        case CMARK_NODE_LIST:
            return .list(ordered: cmark_node_get_list_type(node) == CMARK_ORDERED_LIST,
                         start: Int(cmark_node_get_list_start(node)),
                         tight: cmark_node_get_list_tight(node) != 0,
                         items: children(of: node).map(blocks(in:)))
        case CMARK_NODE_THEMATIC_BREAK:
            return .rule
        case CMARK_NODE_HTML_BLOCK:
            return .html(string(cmark_node_get_literal(node)))
        default:
            if typeName(node) == "table" { return table(node) }
            // Footnote definitions and anything newer: their text, as paragraphs.
            let inner = blocks(in: node)
            return inner.isEmpty ? nil : .quote(inner)
        }
    }

    private static func table(_ node: OpaquePointer) -> Block {
        let columns = Int(cmark_gfm_extensions_get_table_columns(node))
        var alignments: [TableAlignment] = []
        if let codes = cmark_gfm_extensions_get_table_alignments(node) {
            for column in 0..<columns {
                switch UInt8(codes[column]) {
                case UInt8(ascii: "l"): alignments.append(.left)
                case UInt8(ascii: "c"): alignments.append(.center)
                case UInt8(ascii: "r"): alignments.append(.right)
                default: alignments.append(.none)
                }
            }
        }
        let rows = children(of: node).map { row in children(of: row).map(inlines(in:)) }
        return .table(alignments: alignments, rows: rows)
    }

    private static func plainText(_ node: OpaquePointer) -> String {
        if let literal = cmark_node_get_literal(node) { return String(cString: literal) }
        return children(of: node).map(plainText).joined()
    }

    private static func inlines(in node: OpaquePointer) -> [Inline] {
        children(of: node).compactMap(inline)
    }

    private static func inline(_ node: OpaquePointer) -> Inline? {
        switch cmark_node_get_type(node) {
        case CMARK_NODE_TEXT: return .text(string(cmark_node_get_literal(node)))
        case CMARK_NODE_CODE: return .code(string(cmark_node_get_literal(node)))
        case CMARK_NODE_EMPH: return .emphasis(inlines(in: node))
        case CMARK_NODE_STRONG: return .strong(inlines(in: node))
        case CMARK_NODE_LINK: return .link(destination: string(cmark_node_get_url(node)), inlines(in: node))
        case CMARK_NODE_IMAGE: return .image(source: string(cmark_node_get_url(node)), inlines(in: node))
        case CMARK_NODE_SOFTBREAK: return .softBreak
        case CMARK_NODE_LINEBREAK: return .lineBreak
        case CMARK_NODE_HTML_INLINE: return .html(string(cmark_node_get_literal(node)))
        default:
            if typeName(node) == "strikethrough" { return .strikethrough(inlines(in: node)) }
            // Footnote references and anything newer: their text.
            return .text(plainText(node))
        }
    }
}
