/*
 * uiassets.h - the status page's files, built in: the bytes of
 * gateway/ui/index.html, ui.css, ui.js and icon.svg, put in C arrays at build time
 * (gateway/embed.py, gateway/meson.build). Private to the gateway; pure
 * data.
 *
 * Invariant: each array holds exactly its file's bytes, _len of them
 * (followed by a NUL that is not counted), so that GET /_fence/v1/ui/
 * serves the files byte for byte and the page needs no other host.
 */
#ifndef FENCEGATE_UIASSETS_H
#define FENCEGATE_UIASSETS_H

#include <stddef.h>

extern const unsigned char fg_ui_html[];
extern const size_t fg_ui_html_len;
extern const unsigned char fg_ui_css[];
extern const size_t fg_ui_css_len;
extern const unsigned char fg_ui_js[];
extern const size_t fg_ui_js_len;
extern const unsigned char fg_ui_icon[];
extern const size_t fg_ui_icon_len;

#endif
