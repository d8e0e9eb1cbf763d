/// The text `confab shell-init SHELL` prints for the shell's rc file. It is static for a given
/// executable path and pair of keys (no daemon round trip, no subprocess when it is loaded),
/// so it can also be written to a file once and sourced from there.
///
/// What it sets up, in each shell:
/// - `CONFAB_SESSION`, exported: an id for this shell session, so `confab ask -C`, `??` and
///   the keys continue one conversation per shell session.
/// - a `confab` function that passes the previous command line and its exit status to
///   `confab … --last` (in `CONFAB_LAST_COMMAND` and `CONFAB_LAST_STATUS`, for that call only);
///   the line comes from the shell's own history, the status from `$?` as the function starts.
/// - `??`: a quick question in the session's conversation (`confab ask -C [--last] -- TEXT`:
///   every word of TEXT belongs to the question, none is taken for an option).
/// - the command key: the line is replaced by the command the model answers with, for the
///   user to read, edit and run; nothing is run. Ctrl-C while waiting keeps the line as it was.
/// - the explain key: the explanation is printed above the prompt and the line is kept.
public struct Snippet {
    public var shell: Shell
    public var executable: String
    public var commandKey: Key
    public var explainKey: Key

    public init(shell: Shell, executable: String, commandKey: Key = .defaultCommand, explainKey: Key = .defaultExplain) {
        self.shell = shell
        self.executable = executable
        self.commandKey = commandKey
        self.explainKey = explainKey
    }

    public var text: String {
        let template: String
        switch shell {
        case .bash: template = Self.bash
        case .zsh: template = Self.zsh
        case .fish: template = Self.fish
        }
        // One pass over the template, each `@NAME@` replaced as it is met (an `@` that starts
        // no placeholder, as in `$@`, is kept): five replacing() passes cost a new shell more
        // than all the rest of `shell-init`.
        let utf8 = template.utf8
        var result = ""
        result.reserveCapacity(utf8.count + 256)
        var copied = template.startIndex
        var next = template.startIndex
        while let at = utf8[next...].firstIndex(of: UInt8(ascii: "@")) {
            next = utf8.index(after: at)
            guard let end = utf8[next...].firstIndex(of: UInt8(ascii: "@")), let value = value(of: template[next..<end]) else { continue }
            result += template[copied..<at]
            result += value
            copied = utf8.index(after: end)
            next = copied
        }
        result += template[copied...]
        return result
    }

    private func value(of placeholder: Substring) -> String? {
        switch placeholder {
        case "EXE": return Self.quoted(executable, for: shell)
        case "COMMAND_KEY": return commandKey.sequence(for: shell)
        case "EXPLAIN_KEY": return explainKey.sequence(for: shell)
        case "COMMAND_NAME": return commandKey.description
        case "EXPLAIN_NAME": return explainKey.description
        default: return nil
        }
    }

    /// A word the shell reads back as exactly `text`.
    public static func quoted(_ text: String, for shell: Shell) -> String {
        var result = "'"
        for scalar in text.unicodeScalars {
            switch (shell, scalar) {
            case (.bash, "'"), (.zsh, "'"): result += #"'\''"#
            case (.fish, "'"): result += #"\'"#
            case (.fish, "\\"): result += #"\\"#
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "'"
    }

    static let bash = #"""
        # confab shell integration for bash (eval "$(confab shell-init bash)" in ~/.bashrc).
        # @COMMAND_NAME@: the command line becomes a command; @EXPLAIN_NAME@: explain it; ?? TEXT: ask.
        export CONFAB_SESSION="bash-$$-$RANDOM$RANDOM"
        __confab_bin=@EXE@
        # $1: the status of the command before; the rest: confab's arguments.
        __confab_run() {
            local __confab_status=$1
            shift
            if [[ " $* " == *" --last "* ]]; then
                local __confab_previous
                # fc leaves out the line that runs it: -1 is the command before.
                __confab_previous=$(HISTTIMEFORMAT= builtin fc -ln -1 -1 2>/dev/null)
                __confab_previous=${__confab_previous#"${__confab_previous%%[![:space:]]*}"}
                CONFAB_LAST_COMMAND=$__confab_previous CONFAB_LAST_STATUS=$__confab_status "$__confab_bin" "$@"
            else
                "$__confab_bin" "$@"
            fi
        }
        confab() { __confab_run $? "$@"; }
        # ?? [--last] TEXT: every word of TEXT is the question's, none an option (hence --).
        # The alias turns globbing off before the words are expanded, so `?? why does rm * fail`
        # sends the *, not the directory's file names; the function turns it back on unless it
        # was off already. The status before is kept first: set -f would reset it.
        __confab_ask() {
            local __confab_status=$__confab_ask_status
            [[ $__confab_ask_flags == *f* ]] || set +f
            unset __confab_ask_status __confab_ask_flags
            if [[ $1 == --last ]]; then
                shift
                __confab_run "$__confab_status" ask -C --last -- "$@"
            else
                __confab_run "$__confab_status" ask -C -- "$@"
            fi
        }
        alias '??'='__confab_ask_status=$? __confab_ask_flags=$-; set -f; __confab_ask'
        # Ctrl-C while a key waits must end only confab: bash itself would throw the line away.
        __confab_key() {
            local __confab_int __confab_status
            __confab_int=$(trap -p INT)
            trap '' INT
            if [[ $1 == command ]]; then
                __confab_reply=$("$__confab_bin" shell-key command --shell bash -- "$READLINE_LINE")
            else
                "$__confab_bin" shell-key explain --shell bash -- "$READLINE_LINE"
            fi
            __confab_status=$?
            trap - INT
            eval "$__confab_int"
            return $__confab_status
        }
        __confab_command_key() {
            [[ ${READLINE_LINE//[[:space:]]/} ]] || return 0
            local __confab_reply
            __confab_key command && [[ $__confab_reply ]] || return 0
            READLINE_LINE=$__confab_reply
            READLINE_POINT=${#READLINE_LINE}
        }
        __confab_explain_key() {
            [[ ${READLINE_LINE//[[:space:]]/} ]] || return 0
            __confab_key explain
        }
        bind -m emacs -x '"@COMMAND_KEY@": __confab_command_key'
        bind -m vi-insert -x '"@COMMAND_KEY@": __confab_command_key'
        bind -m emacs -x '"@EXPLAIN_KEY@": __confab_explain_key'
        bind -m vi-insert -x '"@EXPLAIN_KEY@": __confab_explain_key'

        """#

    static let zsh = #"""
        # confab shell integration for zsh (eval "$(confab shell-init zsh)" in ~/.zshrc).
        # @COMMAND_NAME@: the command line becomes a command; @EXPLAIN_NAME@: explain it; ?? TEXT: ask.
        export CONFAB_SESSION="zsh-$$-$RANDOM$RANDOM"
        typeset -g __confab_bin=@EXE@
        # $1: the status of the command before; the rest: confab's arguments.
        __confab_run() {
            local __confab_status=$1
            shift
            if [[ " $* " == *" --last "* ]]; then
                local __confab_previous
                # In zsh the running line is not yet an event: -1 is the one before it.
                __confab_previous=$(builtin fc -ln -1 -1 2>/dev/null)
                CONFAB_LAST_COMMAND=$__confab_previous CONFAB_LAST_STATUS=$__confab_status "$__confab_bin" "$@"
            else
                "$__confab_bin" "$@"
            fi
        }
        confab() { __confab_run $? "$@"; }
        # ?? [--last] TEXT: every word of TEXT is the question's, none an option (hence --).
        __confab_ask() {
            local __confab_status=$?
            if [[ $1 == --last ]]; then
                shift
                __confab_run "$__confab_status" ask -C --last -- "$@"
            else
                __confab_run "$__confab_status" ask -C -- "$@"
            fi
        }
        alias '??'='noglob __confab_ask'
        # Ctrl-C while a key waits must end only confab: zle itself would throw the line away.
        __confab_command_key() {
            [[ -n ${BUFFER//[[:space:]]/} ]] || return 0
            setopt localoptions localtraps
            trap '' INT
            local __confab_reply
            zle -I
            if __confab_reply=$("$__confab_bin" shell-key command --shell zsh -- "$BUFFER") && [[ -n $__confab_reply ]]; then
                BUFFER=$__confab_reply
                CURSOR=${#BUFFER}
            fi
            # No reset-prompt: after zle -I the prompt is drawn anew below what was printed
            # (a multi-line command's listing); reset-prompt would draw it over the listing.
        }
        __confab_explain_key() {
            [[ -n ${BUFFER//[[:space:]]/} ]] || return 0
            setopt localoptions localtraps
            trap '' INT
            zle -I
            "$__confab_bin" shell-key explain --shell zsh -- "$BUFFER"
        }
        zle -N __confab_command_key
        zle -N __confab_explain_key
        bindkey -M emacs '@COMMAND_KEY@' __confab_command_key
        bindkey -M viins '@COMMAND_KEY@' __confab_command_key
        bindkey -M emacs '@EXPLAIN_KEY@' __confab_explain_key
        bindkey -M viins '@EXPLAIN_KEY@' __confab_explain_key

        """#

    static let fish = #"""
        # confab shell integration for fish (confab shell-init fish | source, in ~/.config/fish/config.fish).
        # @COMMAND_NAME@: the command line becomes a command; @EXPLAIN_NAME@: explain it; ?? TEXT: ask.
        set -gx CONFAB_SESSION fish-$fish_pid-(random)(random)
        set -g __confab_bin @EXE@
        # $argv[1]: the status of the command before; the rest: confab's arguments.
        function __confab_run
            set -l __confab_status $argv[1]
            set -e argv[1]
            if contains -- --last $argv
                CONFAB_LAST_COMMAND=$history[1] CONFAB_LAST_STATUS=$__confab_status $__confab_bin $argv
            else
                $__confab_bin $argv
            end
        end
        function confab
            __confab_run $status $argv
        end
        # ?? [--last] TEXT: every word of TEXT is the question's, none an option (hence --).
        function __confab_ask
            set -l __confab_status $status
            if test "$argv[1]" = --last
                __confab_run $__confab_status ask -C --last -- $argv[2..-1]
            else
                __confab_run $__confab_status ask -C -- $argv
            end
        end
        # An abbreviation, not a function: fish would take a command named ?? for a wildcard.
        # fish cannot turn globbing off: a * in the question is expanded (or, matching
        # nothing, refused) unless it is quoted.
        abbr -a -- '??' '__confab_ask'
        # Ctrl-C while a key waits must end only confab: with no handler for INT, fish would
        # cancel the key's function before it gives the line back. The handler lives only
        # as long as the key's wait.
        function __confab_command_key
            set -l line (commandline | string collect)
            string trim -- "$line" | string length -q; or return 0
            # fish draws its prompt again from as many rows above the cursor as the cursor's
            # line had above it: what the key printed (a listing, a refusal) is moved that far
            # down first, or the prompt would be drawn over it.
            set -l above (math (commandline --line) - 1)
            function __confab_keep_line --on-signal INT; end
            set -l reply ($__confab_bin shell-key command --shell fish -- "$line")
            set -l code $status
            functions -e __confab_keep_line
            if test $code -eq 0; and test -n "$reply"
                test (count $reply) -gt 1; and string repeat -N -n $above \n >&2
                commandline -r -- (string join \n -- $reply)
                commandline -f end-of-buffer
            else if test $code -ne 130
                string repeat -N -n $above \n >&2
            end
            commandline -f repaint
        end
        function __confab_explain_key
            set -l line (commandline | string collect)
            string trim -- "$line" | string length -q; or return 0
            function __confab_keep_line --on-signal INT; end
            echo
            $__confab_bin shell-key explain --shell fish -- "$line"
            functions -e __confab_keep_line
            commandline -f repaint
        end
        bind @COMMAND_KEY@ __confab_command_key
        bind -M insert @COMMAND_KEY@ __confab_command_key
        bind @EXPLAIN_KEY@ __confab_explain_key
        bind -M insert @EXPLAIN_KEY@ __confab_explain_key

        """#
}
