/// The pages, served from the binary: two HTML shells, one stylesheet and one script (the
/// files in `page/`, embedded at build time). The
/// shells carry no secret: the script holds the page's token (see `script`). The
/// script draws everything from the gateway's events, setting every text with
/// `textContent`; the only HTML it inserts is a reply's markdown, which the gateway
/// rendered (MarkdownHTML). No inline script or style: the Content-Security-Policy is
/// `default-src 'self'`.
public enum Pages {
    public static let contentSecurityPolicy = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// The document every page is: its head (the one stylesheet, the favicon and, for the
    /// pages that draw themselves, the one script), then the body's attributes and content.
    private static func document(title: String, script: Bool, bodyAttributes: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>\(HTMLText.escape(title))</title>
        <link rel="icon" href="/favicon.svg" type="image/svg+xml">
        <link rel="stylesheet" href="/app.css">\(script ? "\n<script src=\"/app.js\" defer></script>" : "")
        </head>
        <body \(bodyAttributes)>
        \(body)
        </body>
        </html>

        """
    }

    static func shell(title: String, body: String, attributes: String) -> String {
        document(title: title, script: true, bodyAttributes: attributes, body: body)
    }

    public static let list = shell(title: "confab", body: """
        <header><div class="bar"><h1>confab</h1><button id="new" class="new" type="button" hidden>New conversation</button><button id="notify" type="button" hidden>Notify me</button><span id="status" class="status">connecting…</span></div></header>
        <main><div class="column"><div id="notice" class="notice" role="status"></div><ul id="conversations" class="conversations"></ul><p id="empty" class="empty" hidden>No conversations yet.</p></div></main>
        """, attributes: "data-page=\"list\"")

    /// A conversation's page; `id` must already be checked (12 characters of the id alphabet).
    public static func conversation(id: String) -> String {
        shell(title: "confab", body: """
            <header><div class="bar"><a href="/" id="back" class="back" aria-label="All conversations">&#8592;</a><h1 id="title">…</h1><button id="rename" class="rename-title" type="button" hidden>Rename</button><form id="retitle" class="rename" hidden><input id="retitle-input" maxlength="200" aria-label="New title"><button id="retitle-cancel" type="button">Cancel</button><button class="primary" type="submit">Save</button></form><span id="presence" class="presence"></span><span id="status" class="status">connecting…</span></div></header>
            <main id="messages" class="messages"></main>
            <footer><div class="column">
            <div id="notice" class="notice" role="status"></div>
            <div id="actions" class="actions"><button id="cancel" type="button" hidden>Stop</button><button id="retry" type="button" hidden>Retry</button><button id="continue" type="button" hidden>Continue</button><button id="notify" type="button" hidden>Notify me</button></div>
            <form id="composer" class="composer"><textarea id="input" rows="2" placeholder="Message: Enter sends, Shift-Enter starts a new line"></textarea><button id="send" type="submit">Send</button></form>
            </div></footer>
            """, attributes: "data-page=\"conversation\" data-conversation=\"\(HTMLText.escape(id))\"")
    }

    /// A page of the gateway's own with no script: a title and a few words, styled by app.css.
    static func plain(title: String, heading: String, body: String) -> String {
        document(title: title, script: false, bodyAttributes: "class=\"plain-page\"", body: """
            <main><div class="card-page"><h1>\(HTMLText.escape(heading))</h1>
            \(body)
            </div></main>
            """)
    }

    public static let unauthorized = plain(title: "confab: not found", heading: "Not found", body: """
        <p>There is nothing here, or this link no longer works.</p>
        <p>On the machine confab runs on, <code>confab web --url</code> prints the owner's link; \
        <code>confab web share ID</code> makes a link to one conversation.</p>
        """)

    public static let unavailable = plain(title: "confab: not available", heading: "Not available", body: """
        <p>confabd could not hand over the file just now: try again in a moment.</p>
        """)

    /// The stylesheet and the script, from `page/app.css` and `page/app.js` beside this file:
    /// SwiftPM embeds them in the binary at build time (`resources: [.embedInCode(…)]` in
    /// Package.swift), so they are edited, checked and diffed as the files they are, and the
    /// executable still needs nothing beside it.
    public static let stylesheet: [UInt8] = PackageResources.app_css
    public static let script: [UInt8] = PackageResources.app_js
    /// The tab's icon (`/favicon.svg`): served, as the CSP lets no `data:` image in.
    public static let favicon: [UInt8] = PackageResources.favicon_svg
}
