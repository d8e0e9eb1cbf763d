#define _XOPEN_SOURCE 700
#include <langinfo.h>
#include <locale.h>
#include <string.h>
#include <sys/ioctl.h>
#include <wchar.h>
#include "cterminal.h"

int confab_wcwidth(unsigned int code_point) { return wcwidth((wchar_t)code_point); }

int confab_use_utf8_locale(void) {
    if (setlocale(LC_CTYPE, "") && strcmp(nl_langinfo(CODESET), "UTF-8") == 0) return 1;
    return setlocale(LC_CTYPE, "C.UTF-8") != NULL;
}

int confab_terminal_size(int fd, int *columns, int *rows) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return 0;
    *columns = size.ws_col;
    *rows = size.ws_row;
    return 1;
}
