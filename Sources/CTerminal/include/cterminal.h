#ifndef CONFAB_CTERMINAL_H
#define CONFAB_CTERMINAL_H

/* The few C library calls the client's terminal code needs that Swift's Glibc module
   hides (wcwidth is behind _XOPEN_SOURCE) or cannot call (ioctl is variadic). */

/* Columns a code point takes on a terminal: 0 for combining marks, 2 for wide (CJK,
   most emoji), 1 otherwise; -1 for controls and unassigned code points. Needs a UTF-8
   LC_CTYPE, which confab_use_utf8_locale sets up. */
int confab_wcwidth(unsigned int code_point);

/* Takes the user's LC_CTYPE when it is UTF-8, else C.UTF-8. Returns 1 when a UTF-8
   locale is in effect. */
int confab_use_utf8_locale(void);

/* The terminal's size in columns and rows, 0 when fd is not a terminal. */
int confab_terminal_size(int fd, int *columns, int *rows);

#endif
