/* The page and its script (tools/view/), embedded at build time by
 * scripts/embed_files.cmake into view_assets.c in the build folder. */
#ifndef KINREG_TOOLS_VIEW_VIEW_ASSETS_H
#define KINREG_TOOLS_VIEW_VIEW_ASSETS_H

#include <stddef.h>

extern const unsigned char kr_view_index_html[];
extern const size_t kr_view_index_html_len;
extern const unsigned char kr_view_view_js[];
extern const size_t kr_view_view_js_len;

#endif
