/*
 * Regression for issue 14.2: nothing the SDK keeps for stale pointers may be freed at process
 * exit while other code can still call in.
 *
 * Destroyed clients are kept as tombstones so that stale client pointers and handles of their
 * operations stay safe. An atexit handler used to free them. This program calls in from an exit
 * handler that runs after the SDK's own (handlers run in reverse order of registration; ours is
 * registered first), which models "another thread still calls in while the process exits" without
 * guessing a schedule. Built with AddressSanitizer, the old code fails here with
 * heap-use-after-free in lsdk_count <- lsdk_handle_release.
 */
#include "CLegacySDK.h"

#include <stdio.h>
#include <stdlib.h>

static lsdk_client_t *client;
static lsdk_handle_t handle;

static void on_completion(void *context, lsdk_status_t status, const lsdk_response_t *response) {
    (void)context;
    (void)status;
    (void)response;
}

static void after_the_sdk(void) {
    /* The client was destroyed long ago; these must stay safe for the whole process lifetime. */
    lsdk_counters_t counters;
    if (lsdk_client_counters(client, &counters) != LSDK_OK) abort();
    if (lsdk_handle_release(handle) != LSDK_OK) abort();
    if (lsdk_cancel(handle) != LSDK_ERR_INVALID_HANDLE) abort();
    char token[8];
    if (lsdk_client_get_session_token(client, token, sizeof token) != LSDK_ERR_CLIENT_DESTROYED) abort();
    if (lsdk_client_post(client, NULL, NULL) != LSDK_ERR_CLIENT_DESTROYED) abort();
    fprintf(stderr, "exit_after_destroy: ok\n");
}

int main(void) {
    atexit(after_the_sdk); /* runs last: after anything the SDK registers below */
    if (lsdk_client_create(NULL, &client) != LSDK_OK) return 1;
    if (lsdk_request_start(client, NULL, NULL, on_completion, NULL, NULL, &handle) != LSDK_OK) return 1;
    if (lsdk_client_destroy(client) != LSDK_OK) return 1;
    return 0;
}
