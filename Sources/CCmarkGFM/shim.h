#ifndef CONFAB_CCMARKGFM_SHIM_H
#define CONFAB_CCMARKGFM_SHIM_H
/* cmark-gfm (BSD-2-Clause), GitHub's CommonMark parser with its table, strikethrough and
   autolink extensions: the markdown parser behind the client's rendering of replies. */
#include <cmark-gfm.h>
#include <cmark-gfm-core-extensions.h>
#endif
