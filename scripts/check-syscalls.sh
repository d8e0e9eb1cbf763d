#!/usr/bin/env bash
# Fails when Swift code outside the wrapper modules makes a system call. C and system calls
# belong in Posix, EventLoop and Curl (and the C shims, and LineEditor, libedit's only
# Swift caller): there every errno, EINTR and short write is handled once, and the rest of
# the code calls those typed wrappers. libc's pure functions (memchr, strtod, strlen, …) are
# not system calls and may be used anywhere; neither are the process-wide settings looked at
# or made once (signal dispositions, isatty, clocks, exit), which are not checked.
# confab-fake-upstream is a test fixture that misbehaves byte by byte on raw sockets on
# purpose; it is no part of what ships and is not checked either.
# Usage: scripts/check-syscalls.sh [source directory]   (default: Sources beside this script)
set -euo pipefail

root="${1:-$(dirname "$0")/../Sources}"
# The modules allowed to make system calls.
wrappers='Posix|EventLoop|Curl|LineEditor|confab-fake-upstream'

# Calls into the kernel (or libc functions that are thin wrappers of one), by name.
calls='open|openat|creat|read|pread|readv|write|pwrite|writev|send|sendto|sendmsg|recv|recvfrom|recvmsg'
calls+='|stat|fstat|lstat|fstatat|statfs|access|faccessat|fsync|fdatasync|sync|syncfs|ftruncate|truncate|lseek'
calls+='|socket|socketpair|connect|bind|listen|accept|accept4|shutdown|getsockopt|setsockopt|getsockname|getpeername'
calls+='|getpwuid|getpwuid_r|getpwnam|getpwnam_r|mkdir|mkdirat|rmdir|rename|renameat|link|symlink|unlink|unlinkat'
calls+='|readlink|chmod|fchmod|chown|fchown|umask|close|dup|dup2|dup3|pipe|pipe2|poll|ppoll|select|epoll_wait'
calls+='|fcntl|ioctl|flock|mmap|munmap|kill|fork|vfork|execv|execve|execvp|posix_spawn|posix_spawnp'
calls+='|waitpid|wait4|opendir|fdopendir|readdir|closedir|tcsetattr|setrlimit|chdir|getcwd|mkstemp|mkstemps'
calls+='|tcflush|tcdrain|tcgetattr|ttyname|ttyname_r|uname|getpid|getppid|gethostname'

found=0
declare -A declared
while IFS= read -r -d '' file; do
    module="${file#"$root"/}"
    module="${module%%/*}"
    if [[ "$module" =~ ^($wrappers)$ ]]; then continue; fi
    # The functions the module declares, in any of its files: a bare call of one of those
    # names is the module's own (an extension in another file calling `send(_:)`).
    if [[ -z "${declared[$module]+set}" ]]; then
        declared[$module]=$(grep -rhoE '\bfunc[[:space:]]+[A-Za-z_][A-Za-z0-9_]*' --include='*.swift' "$root/$module" \
            | awk '{print $2}' | sort -u | tr '\n' ' ')
    fi
    # A Swift file sees C's functions only through its own import of the C library.
    grep -Eq '^[[:space:]]*import[[:space:]]+(Glibc|Darwin|Musl|Foundation)' "$file" || continue
    # Comments and string literals removed (roughly: line comments, /* */ on one line and
    # "..." without escaped quotes), then a call is a listed name followed by "(": written
    # Glibc.name, or bare when the module declares no function of that name (its own method
    # `send(_:)` is no system call), and never a method call (".name(").
    hits=$(perl -ne '
        BEGIN { $calls = shift; %own = map { $_ => 1 } split(/ /, shift); }
        # The code of each \( ... ) in a string literal, parentheses balanced.
        sub interpolations {
            my ($inner) = @_;
            my $code = "";
            while ($inner =~ /\\\(/g) {
                my ($start, $depth, $at) = (pos($inner), 1, pos($inner));
                while ($at < length($inner) && $depth > 0) {
                    my $c = substr($inner, $at++, 1);
                    $depth++ if $c eq "(";
                    $depth-- if $c eq ")";
                }
                $code .= " (" . substr($inner, $start, $at - $start);
                pos($inner) = $at;
            }
            return $code;
        }
        push @lines, [$., $_];
        END {
            for my $entry (@lines) {
                my ($number, $text) = @$entry;
                my $code = $text;
                # A literal is dropped, but the interpolations in it are code and stay
                # ("\\(getpid())" calls getpid).
                $code =~ s{"((?:[^"\\]|\\.)*)"}{ interpolations($1) . q("") }ge;
                $code =~ s{//.*$}{}; $code =~ s{/\*.*?\*/}{}g;
                while ($code =~ /(^|[^.\w]|\bGlibc\.)($calls)\s*\(/g) {
                    my ($before, $name) = ($1, $2);
                    next if $before !~ /Glibc\.$/ && $own{$name};
                    next if substr($code, 0, $-[2]) =~ /\bfunc\s+$/;
                    print "$ARGV:$number: $text";
                    last;
                }
            }
        }' "$calls" "${declared[$module]}" "$file")
    if [[ -n "$hits" ]]; then
        printf '%s\n' "$hits"
        found=1
    fi
done < <(find "$root" -name '*.swift' -print0 | sort -z)

if [[ $found -ne 0 ]]; then
    echo "check-syscalls: system calls outside the wrapper modules ($wrappers); call their wrappers instead" >&2
    exit 1
fi
echo "check-syscalls: no system calls outside $wrappers"
