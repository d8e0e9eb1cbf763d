/// The pages, served from the binary: two HTML shells, one stylesheet and one script (the
/// files in `page/`, embedded at build time). The
/// shells carry no secret: the script holds the page's token (see `script`). The
/// script draws everything from the gateway's events, setting every text with
/// `textContent`; the only HTML it inserts is a reply's markdown, which the gateway
/// rendered (MarkdownHTML). No inline script or style: the Content-Security-Policy is
/// `default-src 'self'`.
public enum Pages {
    public static let contentSecurityPolicy = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    static func shell(title: String, body: String, attributes: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>\(HTMLText.escape(title))</title>
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body \(attributes)>
        \(body)
        </body>
        </html>

        """
    }

    public static let list = shell(title: "confab", body: """
        <header><h1>confab</h1><span id="status" class="status">connecting…</span></header>
        <main><div id="notice" class="notice" role="status"></div><ul id="conversations" class="conversations"></ul><p id="empty" class="empty" hidden>No conversations yet.</p></main>
        """, attributes: "data-page=\"list\"")

    /// A conversation's page; `id` must already be checked (12 characters of the id alphabet).
    public static func conversation(id: String) -> String {
        shell(title: "confab", body: """
            <header><a href="/" id="back" class="back" aria-label="All conversations">&#8592;</a><h1 id="title">…</h1><span id="presence" class="presence"></span><span id="status" class="status">connecting…</span></header>
            <main id="messages" class="messages"></main>
            <footer>
            <div id="notice" class="notice" role="status"></div>
            <div id="actions" class="actions"><button id="cancel" type="button" hidden>Stop</button><button id="retry" type="button" hidden>Retry</button><button id="continue" type="button" hidden>Continue</button></div>
            <form id="composer" class="composer"><textarea id="input" rows="2" placeholder="Message: Enter sends, Shift-Enter starts a new line"></textarea><button id="send" type="submit">Send</button></form>
            </footer>
            """, attributes: "data-page=\"conversation\" data-conversation=\"\(HTMLText.escape(id))\"")
    }

    public static let unauthorized = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>confab: not found</title></head>
        <body><h1>Not found</h1><p>There is nothing here, or this link no longer works.</p></body></html>

        """

    public static let unavailable = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>confab: not available</title></head>
        <body><h1>Not available</h1><p>confabd could not hand over the file just now: try again in a moment.</p></body></html>

        """

    /// The stylesheet and the script, from `page/app.css` and `page/app.js` beside this file:
    /// SwiftPM embeds them in the binary at build time (`resources: [.embedInCode(…)]` in
    /// Package.swift), so they are edited, checked and diffed as the files they are, and the
    /// executable still needs nothing beside it.
    public static let stylesheet: [UInt8] = PackageResources.app_css
    public static let script: [UInt8] = PackageResources.app_js
}
