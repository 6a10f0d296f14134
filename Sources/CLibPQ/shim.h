#ifndef PGDATAKIT_CLIBPQ_SHIM_H
#define PGDATAKIT_CLIBPQ_SHIM_H

#include <libpq-fe.h>
#include <poll.h>

/// Waits until the socket of a connection is readable, or the timeout passes.
/// Returns 1 when readable, 0 on timeout, -1 on error (errno set).
static inline int pgdatakit_wait_readable(int socket, int timeout_ms) {
    struct pollfd descriptor;
    descriptor.fd = socket;
    descriptor.events = POLLIN;
    descriptor.revents = 0;
    int result = poll(&descriptor, 1, timeout_ms);
    if (result > 0) {
        return 1;
    }
    return result;
}

#endif
