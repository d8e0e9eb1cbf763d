# confab: `make run` installs what it needs, builds a release and runs confabd in the
# foreground; `make test` builds once and runs every test. Both work as root on a fresh
# Debian machine (as another user, `make deps` needs sudo once).

PREFIX     ?= $(HOME)/.local
UNITDIR    ?= $(HOME)/.config/systemd/user
DEBIAN_DEPS = libuv1-dev libcurl4-openssl-dev libtomlplusplus-dev libre2-dev libedit-dev libcmark-gfm-dev libcmark-gfm-extensions-dev tmux zsh fish pkg-config systemd redis-server redis-tools chromium python3-venv
SWIFT      ?= swift
ARGS       ?=

.PHONY: all deps build release run test test-web test-web-deps update-test-deps man bench fuzz fuzz-socket soak crashloop powercut install uninstall clean

all: build

# The Debian packages confab builds against, then a check that a Swift toolchain (6.0 or
# later, from swift.org, not apt) is on PATH: without one, say where to get it and fail here
# rather than with "swift: not found" halfway through a build.
deps:
	@missing=""; for p in $(DEBIAN_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@command -v "$(SWIFT)" >/dev/null 2>&1 || { \
		echo "$(SWIFT): not found on PATH. confab needs a Swift 6.0 or later toolchain:" >&2; \
		echo "  get the Debian 12 one from https://www.swift.org/install/linux/ (tarball or swiftly)," >&2; \
		echo "  put its usr/bin on PATH, or name the compiler with make SWIFT=/path/to/usr/bin/swift." >&2; \
		exit 1; }

build: deps
	$(SWIFT) build

# The release binaries carry the Swift runtime (-static-stdlib): less memory and a faster start
# than with the toolchain's shared libraries, and nothing to find in the toolchain's directory
# once installed (docs/performance.md, "Memory and linking"); confab goes further and is one
# static executable (Package.swift says why). Such a binary looks for the
# runtime's crash reporter in libexec/swift/linux beside it (or beside its bin/), so the
# toolchain's static one is copied there: without it a crash would print nothing.
SWIFT_RESOURCES = $(shell $(SWIFT) -print-target-info 2>/dev/null | sed -n 's/.*"runtimeResourcePath": "\(.*\)".*/\1/p')
BACKTRACER      = $(SWIFT_RESOURCES)/../../libexec/swift/linux/swift-backtrace-static
RELEASE_BACKTRACER = libexec/swift/linux/swift-backtrace

release: deps
	$(SWIFT) build -c release --static-swift-stdlib
	@if [ -x "$(BACKTRACER)" ]; then \
		cmp -s "$(BACKTRACER)" $(RELEASEDIR)/$(RELEASE_BACKTRACER) || install -D -m 0755 "$(BACKTRACER)" $(RELEASEDIR)/$(RELEASE_BACKTRACER); \
	else echo "warning: the toolchain has no swift-backtrace-static: crashes of the release binaries will print no report" >&2; fi

run: release
	.build/release/confabd $(ARGS)

# The power-cut simulator's recorder (scripts/powercut/shim.c), preloaded under confabd.
# Built with cc, or with the Swift toolchain's clang where there is no cc.
POWERCUT_SHIM = .build/powercut/libconfab-powercut.so
SHIM_CC ?= $(shell command -v cc 2>/dev/null || command -v clang 2>/dev/null || echo cc)
$(POWERCUT_SHIM): scripts/powercut/shim.c
	@mkdir -p $(dir $@)
	$(SHIM_CC) -shared -fPIC -O2 -Wall -Werror -o $@ scripts/powercut/shim.c -ldl -lpthread

# First, system calls only in the wrapper modules (scripts/check-syscalls.sh), no
# string-keyed params read in the daemon (scripts/check-typed-params.sh), and the module
# graph as Package.swift declares it, as docs/architecture.md's map says, and as its rules
# want it (scripts/check-modules.py: values below behaviour, the imports declared). One debug build
# serves every test target; XCTest is the runner. Then the short runs of the
# long checks on the same build (scripts/long-checks.sh: a 20-kill crash loop, its 2-kill self-test and one per daemon fault mode, 10 power cuts,
# a 1-minute soak; a few minutes together), each one line unless it fails. Last, confab-web
# in a real browser: Debian's chromium driven by Playwright for Python (Tests/web, pytest).
# The MCP servers the integration tests run (MCPServerTests.swift, MCPHTTPTests.swift,
# MCPLifecycleTests.swift): mcp-server-time, mcp-server-git, and the official Python SDK for
# scripts/mcp-test-server.py and scripts/mcp-http-test-server.py (its Streamable HTTP server,
# on loopback), in a virtual environment of their own. Every package is pinned to an exact
# version in Tests/requirements/mcp.txt (installed again when it changes), so a release
# upstream cannot change what the suite runs; `make update-test-deps` moves the pins.
MCP_VENV = .build/venv-mcp
MCP_PACKAGES = mcp-server-time mcp-server-git mcp
MCP_REQUIREMENTS = Tests/requirements/mcp.txt
$(MCP_VENV)/.installed: $(MCP_REQUIREMENTS)
	test -x $(MCP_VENV)/bin/pip || python3 -m venv $(MCP_VENV)
	$(MCP_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(MCP_REQUIREMENTS)
	touch $@

test: deps $(POWERCUT_SHIM) $(MCP_VENV)/.installed
	scripts/check-syscalls.sh
	scripts/check-typed-params.sh
	scripts/check-function-length.py
	SWIFT=$(SWIFT) scripts/check-modules.py
	@# The page's script is parsed where node is at hand (it is not required).
	@if command -v node >/dev/null 2>&1; then node --check Sources/WebGateway/page/app.js; fi
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) scripts/run-xctest.sh
	scripts/long-checks.sh "$$($(SWIFT) build --show-bin-path)" $(POWERCUT_SHIM)
	$(MAKE) test-web

# Power cuts under load (scripts/powercut.py, docs/reliability.md, "Power cuts"): the crash
# loop's load and checks, with the data directory rebuilt after each SIGKILL as a disk would
# hold it after a power cut. 100 cuts, 10 minutes at most; flags through ARGS, e.g.
# ARGS="--kills 300 --max-seconds 1200 --seed 7".
powercut: release $(POWERCUT_SHIM) $(MCP_VENV)/.installed
	python3 scripts/powercut.py --shim $(POWERCUT_SHIM) $(ARGS)

# The browser tests alone, on the debug build `make test` made. Playwright and pytest come
# from PyPI into a virtual environment under the build directory; the browser is Debian's
# (/usr/bin/chromium), as Playwright's own download cannot be used here.
# Pinned like the MCP servers: Tests/requirements/web.txt.
VENV ?= .build/venv
WEB_PACKAGES = playwright pytest
WEB_REQUIREMENTS = Tests/requirements/web.txt
$(VENV)/.installed: $(WEB_REQUIREMENTS)
	test -x $(VENV)/bin/pip || python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(WEB_REQUIREMENTS)
	touch $@

test-web-deps: $(VENV)/.installed

# Moves the test-only pins to the newest releases, deliberately: fresh environments from the
# package names, their complete `pip freeze` written over the requirement files (the comment
# lines kept). Run make test after it and commit the files with what changed.
update-test-deps:
	rm -rf .build/venv-update && python3 -m venv .build/venv-update
	.build/venv-update/bin/pip install --quiet --disable-pip-version-check $(MCP_PACKAGES)
	{ grep '^#' $(MCP_REQUIREMENTS); .build/venv-update/bin/pip freeze; } > $(MCP_REQUIREMENTS).new
	rm -rf .build/venv-update && python3 -m venv .build/venv-update
	.build/venv-update/bin/pip install --quiet --disable-pip-version-check $(WEB_PACKAGES)
	{ grep '^#' $(WEB_REQUIREMENTS); .build/venv-update/bin/pip freeze; } > $(WEB_REQUIREMENTS).new
	mv $(MCP_REQUIREMENTS).new $(MCP_REQUIREMENTS) && mv $(WEB_REQUIREMENTS).new $(WEB_REQUIREMENTS)
	rm -rf .build/venv-update
	@git diff --stat -- $(MCP_REQUIREMENTS) $(WEB_REQUIREMENTS) 2>/dev/null || true

test-web: test-web-deps
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider Tests/web

# scripts/bench.py: every figure next to its peer (Redis, a C client) measured in the same run,
# then a table of the goals (docs/performance.md). Bounded to about 10 minutes on 2 cores.
# Options through ARGS, e.g. ARGS="--only fanout,latency" or ARGS="--big".
bench: release test-web-deps $(MCP_VENV)/.installed
	scripts/bench.sh $(ARGS)

# libFuzzer on the parsers of untrusted bytes (docs/reliability.md, "Hostile and broken clients"), bounded in time:
# `make fuzz FUZZ_SECONDS=600` for longer than the default 60 s per target.
fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

# The socket fuzzer (scripts/fuzz-socket.py: hostile JSON-RPC traffic against a release
# confabd, then 20 s of hostile MCP servers (--mcp-seconds), then its gateway round of hostile
# WebSocket traffic against confab-web, 30 s (--gateway-seconds); docs/reliability.md, "Hostile
# and broken clients"), 120 s unless FUZZ_SECONDS says otherwise, after the flood; time is the
# bound, not a line count. More flags through ARGS, e.g. ARGS="--seed 42".
fuzz-socket: release
	python3 scripts/fuzz-socket.py --seconds $(or $(FUZZ_SECONDS),120) --count 1000000000 $(ARGS)

# A bounded soak (10 minutes by default): scripts/soak.py, docs/reliability.md, "Soak test".
# Options through ARGS, e.g. make soak ARGS="--minutes 3 --seed 42".
soak: release
	python3 scripts/soak.py $(ARGS)

# SIGKILLs a release confabd under load and checks what survived (scripts/crashloop.py):
# 100 kills, 10 minutes at most. Flags through ARGS, e.g. ARGS="--kills 20 --seed 7".
crashloop: release $(MCP_VENV)/.installed
	python3 scripts/crashloop.py $(ARGS)

# Binaries to $(PREFIX)/bin (~/.local/bin), units to ~/.config/systemd/user (see "Run as a
# service" in README.md). The config and data directories are made private (0700) here; the
# data directory must exist for the unit's sandbox (its ExecStartPre= makes it too).
# systemd/confabd.service runs %h/.local/bin/confabd, which is where the default PREFIX puts
# it, so it is installed unchanged; for any other PREFIX the installed copy names
# $(PREFIX)/bin/confabd instead, made absolute.
RELEASEDIR ?= .build/release
# Where bash-completion, zsh, fish and man look under PREFIX (for ~/.local: bash-completion
# and fish read these by themselves and man finds ~/.local/share/man from ~/.local/bin on
# PATH; zsh needs fpath+=(~/.local/share/zsh/site-functions) before compinit, while
# /usr/local/share/zsh/site-functions is on Debian's default fpath).
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
MANDIR      ?= $(PREFIX)/share/man/man1
CONFIGDIR  ?= $(HOME)/.config/confab
DATADIR    ?= $(HOME)/.local/share/confab
SHIPPED_CONFABD = %h/.local/bin/confabd

ifeq ($(abspath $(PREFIX)),$(abspath $(HOME)/.local))
install_service = install -m 0644 systemd/confabd.service $(UNITDIR)/confabd.service
else
install_service = sed 's|^ExecStart=/usr/bin/env $(SHIPPED_CONFABD)$$|ExecStart=/usr/bin/env $(abspath $(PREFIX))/bin/confabd|' \
		systemd/confabd.service > $(UNITDIR)/confabd.service.tmp && \
	{ grep -qxF 'ExecStart=/usr/bin/env $(abspath $(PREFIX))/bin/confabd' $(UNITDIR)/confabd.service.tmp || { \
		echo "install: systemd/confabd.service has no 'ExecStart=/usr/bin/env $(SHIPPED_CONFABD)' line to rewrite" >&2; \
		rm -f $(UNITDIR)/confabd.service.tmp; exit 1; }; } && \
	chmod 0644 $(UNITDIR)/confabd.service.tmp && \
	mv -f $(UNITDIR)/confabd.service.tmp $(UNITDIR)/confabd.service
endif

# confab-web.service (not enabled) runs %h/.local/bin/confab-web: rewritten like confabd's
# for another PREFIX.
install_web_service = sed 's|^ExecStart=/usr/bin/env %h/.local/bin/confab-web serve$$|ExecStart=/usr/bin/env $(abspath $(PREFIX))/bin/confab-web serve|' \
		systemd/confab-web.service > $(UNITDIR)/confab-web.service.tmp && \
	chmod 0644 $(UNITDIR)/confab-web.service.tmp && mv -f $(UNITDIR)/confab-web.service.tmp $(UNITDIR)/confab-web.service

install: release
	install -d $(PREFIX)/bin $(UNITDIR)
	install -d -m 0700 $(CONFIGDIR) $(DATADIR)
	install -m 0755 $(RELEASEDIR)/confabd $(RELEASEDIR)/confab $(PREFIX)/bin/
	if [ -x $(RELEASEDIR)/confab-web ]; then install -m 0755 $(RELEASEDIR)/confab-web $(PREFIX)/bin/; fi
	install -d $(BASHCOMPDIR) $(ZSHCOMPDIR) $(FISHCOMPDIR) $(MANDIR)
	$(RELEASEDIR)/confab completions bash > $(BASHCOMPDIR)/confab
	$(RELEASEDIR)/confab completions zsh > $(ZSHCOMPDIR)/_confab
	$(RELEASEDIR)/confab completions fish > $(FISHCOMPDIR)/confab.fish
	install -m 0644 docs/confab.1 $(MANDIR)/confab.1
	if [ -x $(RELEASEDIR)/$(RELEASE_BACKTRACER) ]; then install -D -m 0755 $(RELEASEDIR)/$(RELEASE_BACKTRACER) $(PREFIX)/$(RELEASE_BACKTRACER); fi
	$(install_service)
	install -m 0644 systemd/confabd.socket $(UNITDIR)/confabd.socket
	$(install_web_service)
	@echo
	@echo "Installed confabd and confab to $(PREFIX)/bin and the units to $(UNITDIR). Enable with:"
	@echo "  systemctl --user daemon-reload"
	@echo "  systemctl --user enable --now confabd.socket"
	@echo "The browser gateway, if wanted: systemctl --user enable --now confab-web.service; confab web --url"
	@echo "API key, if your server needs one: OPENAI_API_KEY=... in $(CONFIGDIR)/env (mode 0600)."
	@echo "After an upgrade: systemctl --user daemon-reload && systemctl --user restart confabd.service"

# docs/confab.1 is generated from the argument parser by its generate-manual tool; run this
# after changing a command's options or help, and commit the result. (The tool is run directly:
# argument-parser's plugin makes a page for every executable, and confab's alone is wanted.)
man: build
	$(SWIFT) build --product generate-manual
	"$$($(SWIFT) build --show-bin-path)/generate-manual" "$$($(SWIFT) build --show-bin-path)/confab" --output-directory docs

# Leaves the config ($(CONFIGDIR)) and the conversations ($(DATADIR)) alone.
uninstall:
	-systemctl --user disable --now confabd.socket confabd.service 2>/dev/null
	-systemctl --user disable --now confab-web.service 2>/dev/null
	rm -f $(PREFIX)/bin/confabd $(PREFIX)/bin/confab $(UNITDIR)/confabd.service $(UNITDIR)/confabd.socket
	rm -f $(PREFIX)/bin/confab-web $(UNITDIR)/confab-web.service
	rm -f $(BASHCOMPDIR)/confab $(ZSHCOMPDIR)/_confab $(FISHCOMPDIR)/confab.fish $(MANDIR)/confab.1
	rm -f $(PREFIX)/$(RELEASE_BACKTRACER)
	-rmdir $(PREFIX)/libexec/swift/linux $(PREFIX)/libexec/swift $(PREFIX)/libexec 2>/dev/null
	-systemctl --user daemon-reload 2>/dev/null

clean:
	rm -rf .build
