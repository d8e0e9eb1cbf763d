import ConfabProtocol
import Markdown

/// Markdown as HTML for the browser, rendered here on the server from cmark-gfm's tree.
/// Everything in the tree is somebody else's text, so nothing of it becomes markup of its
/// own: raw HTML is shown as the literal text it is (a model explaining `<div>` or quoting
/// `<img onerror=…>` is read, not run, and not dropped either), links keep only the
/// http, https and mailto schemes, and images are never loaded (a link to them instead).
public enum MarkdownHTML {
    public static let allowedLinkSchemes: Set<String> = ["http", "https", "mailto"]

    public static func render(_ text: String) -> String {
        var out = ""
        for located in Markdown.parse(text) { block(located.block, into: &out) }
        return out
    }

    /// The destination when its scheme is one a page may follow, else nil. Relative links
    /// are refused too: they would point into the gateway itself.
    public static func safeDestination(_ destination: String) -> String? {
        let trimmed = destination.trimmingWhitespace
        guard let colon = trimmed.firstIndex(of: ":") else { return nil }
        let scheme = trimmed[..<colon].lowercased()
        guard allowedLinkSchemes.contains(scheme) else { return nil }
        if scheme != "mailto" && !trimmed[trimmed.index(after: colon)...].hasPrefix("//") { return nil }
        // No control characters or white space in what becomes an attribute.
        guard !trimmed.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) else { return nil }
        return trimmed
    }

    private static func block(_ block: Block, into out: inout String) {
        switch block {
        case .paragraph(let inlines):
            out += "<p>"; self.inlines(inlines, into: &out); out += "</p>\n"
        case .heading(let level, let inlines):
            let tag = "h\(min(max(level, 1), 6))"
            out += "<\(tag)>"; self.inlines(inlines, into: &out); out += "</\(tag)>\n"
        case .code(let language, let text):
            let name = language.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "+-_#.".contains($0)) }
            if name.isEmpty {
                out += "<pre><code>"
            } else {
                out += "<pre data-lang=\"\(name)\"><code class=\"language-\(name)\">"
            }
            out += HTMLText.escape(text) + "</code></pre>\n"
        case .quote(let blocks):
            out += "<blockquote>\n"
            for inner in blocks { self.block(inner, into: &out) }
            out += "</blockquote>\n"
        case .list(let ordered, let start, let tight, let items):
            if ordered {
                out += start == 1 ? "<ol>\n" : "<ol start=\"\(start)\">\n"
            } else {
                out += "<ul>\n"
            }
            for item in items {
                out += "<li>"
                for inner in item {
                    if tight, case .paragraph(let inlines) = inner {
                        self.inlines(inlines, into: &out)
                    } else {
                        self.block(inner, into: &out)
                    }
                }
                out += "</li>\n"
            }
            out += ordered ? "</ol>\n" : "</ul>\n"
        case .table(let alignments, let rows):
            out += "<div class=\"table\"><table>\n"
            for (index, row) in rows.enumerated() {
                if index == 0 { out += "<thead>" } else if index == 1 { out += "<tbody>" }
                out += "<tr>"
                let tag = index == 0 ? "th" : "td"
                for (column, cell) in row.enumerated() {
                    let alignment = column < alignments.count ? alignments[column] : .none
                    switch alignment {
                    case .none: out += "<\(tag)>"
                    case .left: out += "<\(tag) class=\"al\">"
                    case .center: out += "<\(tag) class=\"ac\">"
                    case .right: out += "<\(tag) class=\"ar\">"
                    }
                    inlines(cell, into: &out)
                    out += "</\(tag)>"
                }
                out += "</tr>"
                if index == 0 { out += "</thead>\n" }
            }
            if rows.count > 1 { out += "</tbody>" }
            out += "</table></div>\n"
        case .rule:
            out += "<hr>\n"
        case .html(let text):
            // Shown as what it is: text, in a block of its own, line breaks kept.
            out += "<pre class=\"raw\">" + HTMLText.escape(text) + "</pre>\n"
        }
    }

    private static func inlines(_ inlines: [Inline], into out: inout String) {
        for inline in inlines { self.inline(inline, into: &out) }
    }

    private static func inline(_ inline: Inline, into out: inout String) {
        switch inline {
        case .text(let text): out += HTMLText.escape(text)
        case .code(let text): out += "<code>" + HTMLText.escape(text) + "</code>"
        case .emphasis(let inner): out += "<em>"; inlines(inner, into: &out); out += "</em>"
        case .strong(let inner): out += "<strong>"; inlines(inner, into: &out); out += "</strong>"
        case .strikethrough(let inner): out += "<del>"; inlines(inner, into: &out); out += "</del>"
        case .link(let destination, let inner):
            if let safe = safeDestination(destination) {
                out += anchor(safe)
                inlines(inner, into: &out)
                out += "</a>" + localMark(safe)
            } else {
                // A link whose scheme a page must not follow: its text, then where it
                // pointed, as text, so the reader still sees everything the model wrote.
                inlines(inner, into: &out)
                out += " <span class=\"unsafe-link\">(" + HTMLText.escape(destination) + ")</span>"
            }
        case .image(let source, let inner):
            // Loading an image would tell its server that somebody is reading: a link.
            var alt = ""
            plainText(inner, into: &alt)
            let label = "[image: " + (alt.isEmpty ? source : alt) + "]"
            if let safe = safeDestination(source) {
                out += anchor(safe) + HTMLText.escape(label) + "</a>" + localMark(safe)
            } else {
                out += HTMLText.escape(label + " (" + source + ")")
            }
        case .softBreak: out += "\n"
        case .lineBreak: out += "<br>\n"
        case .html(let text): out += HTMLText.escape(text)
        }
    }

    /// A link's opening tag: a new tab, no referrer, no opener.
    private static func anchor(_ safe: String) -> String {
        let local = LocalAddress.isLocal(url: safe)
        return "<a href=\"" + HTMLText.escape(safe) + "\" rel=\"noopener noreferrer nofollow\" target=\"_blank\""
            + (local ? " class=\"local-link\"" : "") + ">"
    }

    /// After a link to this machine or the local network (LocalAddress): a visible warning,
    /// as such a link leads to a service that whoever wrote it may run.
    private static func localMark(_ safe: String) -> String {
        LocalAddress.isLocal(url: safe) ? " <span class=\"local-mark\">[local address]</span>" : ""
    }

    private static func plainText(_ inlines: [Inline], into out: inout String) {
        for inline in inlines {
            switch inline {
            case .text(let text), .code(let text), .html(let text): out += text
            case .emphasis(let inner), .strong(let inner), .strikethrough(let inner),
                 .link(_, let inner), .image(_, let inner): plainText(inner, into: &out)
            case .softBreak, .lineBreak: out += " "
            }
        }
    }
}

