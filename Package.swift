// swift-tools-version:6.0
import PackageDescription

// Warnings are problems to fix: every target of ours is built with them as errors.
let strict: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

let package = Package(
    name: "confab",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "confabd", targets: ["confabd"]),
        .executable(name: "confab", targets: ["confab"]),
        .executable(name: "confab-fake-upstream", targets: ["confab-fake-upstream"]),
        .executable(name: "confab-loggen", targets: ["confab-loggen"]),
        .executable(name: "confab-web", targets: ["confab-web"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // The browser gateway's HTTP and WebSocket server (confab-web only).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
    ],
    targets: [
        // C libraries, seen through module maps with a few typed shims.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),

        // The only modules that touch C pointers: libuv, libcurl, and the few POSIX calls
        // (sockets outside libuv, whole-file reads, the user database) made elsewhere.
        .target(name: "EventLoop", dependencies: ["CLibUV"], swiftSettings: strict),
        // libcurl (Debian's libcurl4-openssl-dev for the headers), loaded with dlopen on first
        // use, so an idle daemon maps no TLS stack: see Sources/CCurl/include/ccurl.h.
        .target(name: "CCurl", cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Werror"])]),
        .target(name: "Curl", dependencies: ["CCurl", "EventLoop"], swiftSettings: strict),
        .target(name: "Posix", dependencies: ["CBytes"], swiftSettings: strict),
        // glibc's memmem and memrchr, for the search over conversation logs.
        .target(name: "CBytes", cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Werror"])]),
        // toml++ (Debian's libtomlplusplus-dev, header-only here) behind a C API, and the
        // Swift module that turns its tree into values: the config's parser, without Foundation.
        .target(name: "CTOML", cxxSettings: [
            .define("TOML_HEADER_ONLY", to: "1"), .define("TOML_EXCEPTIONS", to: "0"),
            .define("TOML_ENABLE_FORMATTERS", to: "0"), .unsafeFlags(["-Wall", "-Wextra", "-Werror"]),
        ]),
        .target(name: "TOML", dependencies: ["CTOML"], swiftSettings: strict),
        // What the client shows on a terminal: safe text, display width, rendering.
        .target(name: "CTerminal"),
        .systemLibrary(name: "CLibEdit", pkgConfig: "libedit", providers: [.apt(["libedit-dev"])]),
        // The only Swift code that touches libedit.
        .target(name: "LineEditor", dependencies: ["CLibEdit"], swiftSettings: strict),
        // cmark-gfm (Debian's libcmark-gfm-dev and -extensions-dev), and the only Swift code
        // that touches it: markdown parsed into Swift values.
        .systemLibrary(name: "CCmarkGFM", pkgConfig: "libcmark-gfm",
                       providers: [.apt(["libcmark-gfm-dev", "libcmark-gfm-extensions-dev"])]),
        .target(name: "Markdown", dependencies: ["CCmarkGFM"], swiftSettings: strict),
        .target(name: "Terminal", dependencies: ["CTerminal", "Markdown", "ConfabProtocol"], swiftSettings: strict),

        // Pure Swift: shared by daemon and client.
        .target(name: "ConfabProtocol", swiftSettings: strict),
        // The log of confabd and confab-web: typed levels, the line's form, its escaping
        // (ConfabProtocol's LogText). No I/O: the program gives it where lines go.
        .target(name: "ConfabLog", dependencies: ["ConfabProtocol"], swiftSettings: strict),
        // Server-sent events, parsed without I/O: the model servers' streams (Upstream) and
        // MCP's Streamable HTTP answers (MCP) both read them.
        .target(name: "SSE", swiftSettings: strict),
        // RE2 (Debian's libre2-dev) behind a C API: the `pattern` of a tool's schema, from the
        // config or an MCP server, matched in time linear in the string (no backtracking).
        .target(name: "CRE2", cxxSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Werror"])],
                linkerSettings: [.linkedLibrary("re2")]),
        // Swift, daemon only: the HTTP tools the model may call, as the config describes them
        // (schema checks, with patterns through CRE2; the request a call becomes, what the
        // model is given back).
        .target(name: "Tools", dependencies: ["ConfabProtocol", "CRE2"], swiftSettings: strict),
        // Pure Swift, client only: the shell snippets and what the key binding does with a reply.
        .target(name: "ShellIntegration", swiftSettings: strict),

        // Daemon internals.
        // The services the daemon talks to, as values: model providers (`[upstream]`,
        // `[providers.NAME]`) and MCP servers (`[mcp.NAME]`, the `mcpServers` file). Below
        // Upstream and MCP, which run them, and below the settings, which hold them.
        .target(name: "ServiceSettings", dependencies: ["ConfabProtocol", "Tools"], swiftSettings: strict),
        .target(name: "Upstream", dependencies: ["Curl", "EventLoop", "ConfabProtocol", "CBytes", "SSE", "ServiceSettings"], swiftSettings: strict),
        // MCP servers as tool sources: the protocol's client as a state machine over lines, and
        // the child process on the loop that it speaks to, or the server over Streamable HTTP
        // (libcurl, the SSE parser; the headers of Tools).
        .target(name: "MCP", dependencies: ["ConfabProtocol", "ConfabLog", "EventLoop", "Curl", "SSE", "ServiceSettings", "Tools"], swiftSettings: strict),
        .target(name: "LogStore", dependencies: ["EventLoop", "Posix", "ConfabProtocol", "CBytes"], swiftSettings: strict),
        // What the daemon is configured with, as values: the settings, limits, profiles and context
        // budget. Config makes them from the file; Broker runs on them. Neither knows the other.
        .target(name: "DaemonSettings", dependencies: ["ConfabProtocol", "ServiceSettings", "Tools", "WebConfig"], swiftSettings: strict),
        .target(name: "Broker", dependencies: [
            "EventLoop", "Posix", "Upstream", "LogStore", "ConfabProtocol", "ConfabLog", "Tools", "DaemonSettings", "ServiceSettings", "MCP",
        ], swiftSettings: strict),
        .target(name: "Config", dependencies: ["TOML", "DaemonSettings", "ServiceSettings", "ConfabProtocol", "Posix", "Tools", "WebConfig", "ClientConfig"], swiftSettings: strict),

        .executableTarget(name: "confabd", dependencies: [
            "Broker", "Config", "DaemonSettings", "ServiceSettings", "EventLoop", "Posix", "Upstream", "LogStore", "ConfabProtocol", "ConfabLog",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict, linkerSettings: [
            // Relative relocations packed (DT_RELR, glibc 2.36): the static Swift runtime made the
            // position-independent daemon carry 963 KB of them, all read by the dynamic loader
            // at every start and resident for good; packed they take 8 KB (docs/performance.md,
            // "Memory and linking"). The toolchain's lld does it; gold, the default, cannot.
            .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                         .when(platforms: [.linux], configuration: .release)),
        ]),
        // The release client is one static executable: no dynamic loader, no relocations of
        // libstdc++ and no position-independent start-up, which is most of what a cold
        // `confab ls` paid beyond the C client's floor (docs/performance.md, "Client cold
        // start"). libedit's own dependencies are named because a static link needs them.
        // glibc's user lookups (getpwuid_r, getpwnam) would load NSS modules at run time,
        // which crashes a static executable for users those modules serve: the client makes
        // none (PasswdFile in Posix; `$USER` for its own name).
        .executableTarget(name: "confab", dependencies: [
            "ConfabProtocol", "Posix", "Terminal", "LineEditor", "ShellIntegration", "ClientConfig",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict, linkerSettings: [
            .unsafeFlags(["-static-executable", "-static-stdlib"], .when(platforms: [.linux], configuration: .release)),
            .linkedLibrary("tinfo", .when(platforms: [.linux], configuration: .release)),
            .linkedLibrary("bsd", .when(platforms: [.linux], configuration: .release)),
            .linkedLibrary("md", .when(platforms: [.linux], configuration: .release)),
            // What swift build passes only with --static-swift-stdlib (-static-stdlib above, and
            // the C shims and collections of FoundationEssentials, which argument-parser uses):
            // a static executable links the static archives either way, so plain
            // `swift build -c release` needs them named here. With the flag, twice is harmless.
            .linkedLibrary("_FoundationCShims", .when(platforms: [.linux], configuration: .release)),
            .linkedLibrary("_FoundationCollections", .when(platforms: [.linux], configuration: .release)),
            .linkedLibrary("swiftSynchronization", .when(platforms: [.linux], configuration: .release)),
        ]),
        .executableTarget(name: "confab-fake-upstream", swiftSettings: strict),
        // Writes big data directories through the daemon's own log writer, for benchmarks.
        .executableTarget(name: "confab-loggen", dependencies: [
            "LogStore", "EventLoop", "ConfabProtocol", "Posix",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict),

        // The browser gateway: its testable logic (pages, markdown as HTML, tokens and share
        // links, the [web] settings) in WebGateway, the server in confab-web.
        // `[web]` of the config file: read by confabd (which keeps and checks it) and by confab-web.
        .target(name: "WebConfig", dependencies: ["TOML"], swiftSettings: strict),
        // `[client]` of the config file: checked by confabd, read by `confab attach` alone.
        .target(name: "ClientConfig", dependencies: ["TOML", "ConfabProtocol"], swiftSettings: strict),
        // The page's script and stylesheet are files (Sources/WebGateway/page), embedded in the
        // binary as byte arrays at build time: docs/architecture.md, "The browser gateway".
        .target(name: "WebGateway", dependencies: ["ConfabProtocol", "Markdown", "Posix", "Terminal"],
                resources: [.embedInCode("page/app.js"), .embedInCode("page/app.css"), .embedInCode("page/favicon.svg")], swiftSettings: strict),
        .executableTarget(name: "confab-web", dependencies: [
            "WebGateway", "WebConfig", "ConfabProtocol", "ConfabLog", "Posix",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict),

        .testTarget(name: "ConfabProtocolTests", dependencies: ["ConfabProtocol"], swiftSettings: strict),
        .testTarget(name: "UpstreamTests", dependencies: ["Upstream", "SSE", "ServiceSettings"], swiftSettings: strict),
        .testTarget(name: "ConfabLogTests", dependencies: ["ConfabLog"], swiftSettings: strict),
        .testTarget(name: "TerminalTests", dependencies: ["Terminal", "Markdown"], swiftSettings: strict),
        .testTarget(name: "ShellIntegrationTests", dependencies: ["ShellIntegration"], swiftSettings: strict),
        .testTarget(name: "PosixTests", dependencies: ["Posix", "EventLoop"], swiftSettings: strict),
        .testTarget(name: "BrokerTests", dependencies: ["Broker", "DaemonSettings", "ServiceSettings", "ConfabProtocol", "ConfabLog", "Upstream"], swiftSettings: strict),
        .testTarget(name: "ConfigTests", dependencies: ["Config", "DaemonSettings", "ServiceSettings", "TOML", "Tools", "ConfabProtocol", "Posix", "WebConfig", "ClientConfig"], swiftSettings: strict),
        .testTarget(name: "ToolsTests", dependencies: ["Tools", "ConfabProtocol"], swiftSettings: strict),
        .testTarget(name: "MCPTests", dependencies: ["MCP", "ServiceSettings", "ConfabProtocol", "ConfabLog", "EventLoop", "Curl", "Tools"], swiftSettings: strict),
        .testTarget(name: "LogStoreTests", dependencies: ["LogStore", "EventLoop"], swiftSettings: strict),
        .testTarget(name: "WebGatewayTests", dependencies: ["WebGateway", "ConfabProtocol", "Terminal", "WebConfig"], swiftSettings: strict),
        .testTarget(name: "IntegrationTests", dependencies: [
            "ConfabProtocol", "confabd", "confab", "confab-fake-upstream", "confab-loggen", "confab-web",
        ], swiftSettings: strict),
    ],
    cxxLanguageStandard: .cxx17
)
