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

/// Waits until the socket is readable, the wake descriptor is readable, or the timeout
/// passes. Returns 1 when the socket is readable, 2 when only the wake descriptor is,
/// 0 on timeout, -1 on error (errno set).
static inline int pgdatakit_wait_readable_or_woken(int socket, int wake, int timeout_ms) {
    struct pollfd descriptors[2];
    descriptors[0].fd = socket;
    descriptors[0].events = POLLIN;
    descriptors[0].revents = 0;
    descriptors[1].fd = wake;
    descriptors[1].events = POLLIN;
    descriptors[1].revents = 0;
    int result = poll(descriptors, 2, timeout_ms);
    if (result > 0) {
        return descriptors[0].revents != 0 ? 1 : 2;
    }
    return result;
}

/// Reads one row's fields: for each of the first `columns` columns, its text (NULL for
/// SQL NULL) and its length in bytes. One call per row where the Swift side made two or
/// three per field (`FieldReader`, a fetch's loop over its rows).
static inline void pgdatakit_row_fields(
    const PGresult *result, int row, int columns, const unsigned char **values, int *lengths) {
    for (int column = 0; column < columns; column++) {
        int length = PQgetlength(result, row, column);
        const char *value = PQgetvalue(result, row, column);
        if (length == 0 && PQgetisnull(result, row, column)) {
            value = NULL;
        }
        values[column] = (const unsigned char *)value;
        lengths[column] = length;
    }
}

#endif
