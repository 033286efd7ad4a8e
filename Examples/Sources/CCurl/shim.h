#ifndef LEGACY_BRIDGE_EXAMPLES_CURL_SHIM_H
#define LEGACY_BRIDGE_EXAMPLES_CURL_SHIM_H

// libcurl, as the HTTPDownloader example sees it. Only HTTPDownloader/Internal/Curl.swift imports it.
//
// curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot call:
// these typed wrappers are the only addition, one per argument type the example passes.
#include <curl/curl.h>
#include <sys/socket.h>
#include <netinet/in.h>

static inline CURLcode ccurl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode ccurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode ccurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode ccurl_easy_setopt_write_function(CURL *easy, curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode ccurl_easy_setopt_opensocket_function(CURL *easy, curl_opensocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
}

static inline CURLcode ccurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode ccurl_easy_getinfo_offset(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode ccurl_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/// CURL_GLOBAL_DEFAULT, as a constant Swift can import.
static const long ccurl_global_default = CURL_GLOBAL_DEFAULT;
/// CURLPAUSE_CONT, as a constant Swift can import.
static const int ccurl_pause_continue = CURLPAUSE_CONT;
/// CURL_WRITEFUNC_PAUSE, as a constant Swift can import.
static const size_t ccurl_writefunc_pause = CURL_WRITEFUNC_PAUSE;

#endif
