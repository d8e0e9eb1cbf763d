# confab: `make run` installs what it needs, builds a release and runs confabd in the
# foreground; `make test` builds once and runs every test. Both work as root on a fresh
# Debian machine (as another user, `make deps` needs sudo once).

PREFIX     ?= $(HOME)/.local
UNITDIR    ?= $(HOME)/.config/systemd/user
DEBIAN_DEPS = libuv1-dev libcurl4-openssl-dev pkg-config systemd
SWIFT      ?= swift
ARGS       ?=

.PHONY: all deps build release run test bench install uninstall clean

all: build

deps:
	@missing=""; for p in $(DEBIAN_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	.build/release/confabd $(ARGS)

# One debug build serves every test target; XCTest is the runner.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing

bench: release
	scripts/bench.sh

install: release
	install -d $(PREFIX)/bin $(UNITDIR)
	install -m 0755 .build/release/confabd .build/release/confab $(PREFIX)/bin/
	sed 's|@BINDIR@|$(PREFIX)/bin|g' systemd/confabd.service > $(UNITDIR)/confabd.service
	install -m 0644 systemd/confabd.socket $(UNITDIR)/confabd.socket
	@echo
	@echo "Installed confabd and confab to $(PREFIX)/bin and the units to $(UNITDIR). Enable with:"
	@echo "  systemctl --user daemon-reload"
	@echo "  systemctl --user enable --now confabd.socket"

uninstall:
	-systemctl --user disable --now confabd.socket confabd.service 2>/dev/null
	rm -f $(PREFIX)/bin/confabd $(PREFIX)/bin/confab $(UNITDIR)/confabd.service $(UNITDIR)/confabd.socket
	-systemctl --user daemon-reload 2>/dev/null

clean:
	rm -rf .build
