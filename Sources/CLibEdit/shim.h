#ifndef CONFAB_CLIBEDIT_SHIM_H
#define CONFAB_CLIBEDIT_SHIM_H
/* libedit (BSD), through its readline-compatible callback interface: the line editor of
   `confab attach`, driven one key at a time from the client's poll loop. */
#include <stdio.h>
#include <editline/readline.h>

/* Mutable C globals are off limits to Swift 6 code; these set them. */
static inline void confab_rl_set_catch_signals(int on) { rl_catch_signals = on; }
static inline int confab_rl_line_length(void) { return rl_end; }
static inline void confab_rl_set_getc(int (*getc_function)(FILE *)) { rl_getc_function = getc_function; }
/* Completion of the whole line before the cursor (no word breaks but a newline), by a
   function that returns every completion of it; nothing is appended after one. */
static inline void confab_rl_set_line_completion(rl_completion_func_t *function) {
    rl_attempted_completion_function = function;
    rl_basic_word_break_characters = "\n";
    rl_completer_word_break_characters = "\n";
    rl_completion_append_character = 0;
}
/* No completion of file names when the function found nothing. */
static inline void confab_rl_completion_over(void) { rl_attempted_completion_over = 1; }
/* Tab completes file names, but not after `~`: libedit expands `~` and `~user` with
   getpwuid_r and getpwnam_r, and in the static client those load NSS modules, which crash
   for a user they serve (see PasswdFile in Posix). Such a word completes to nothing. */
static inline char *confab_rl_filename_completion(const char *text, int state) {
    if (text != NULL && text[0] == '~') return NULL;
    return rl_filename_completion_function(text, state);
}
static inline void confab_rl_complete_file_names_without_tilde(void) {
    rl_completion_entry_function = confab_rl_filename_completion;
}
#endif
