#include "cfetchfloor.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

struct user_row {
    long long id;
    long long version;
    char *user_id;
    char *name;
    int age;
    int has_age;
};

static char *copy_text(const PGresult *result, int row, int column) {
    if (PQgetisnull(result, row, column)) return NULL;
    int length = PQgetlength(result, row, column);
    char *text = malloc((size_t)length + 1);
    if (text == NULL) return NULL;
    memcpy(text, PQgetvalue(result, row, column), (size_t)length + 1);
    return text;
}

void *pgdatakit_c_floor_open(const char *conninfo) {
    PGconn *connection = PQconnectdb(conninfo);
    if (PQstatus(connection) != CONNECTION_OK) {
        PQfinish(connection);
        return NULL;
    }
    return connection;
}

long long pgdatakit_c_floor_scan(void *connection, const char *sql, long long *checksum) {
    PGresult *result = PQexecParams((PGconn *)connection, sql, 0, NULL, NULL, NULL, NULL, 0);
    if (PQresultStatus(result) != PGRES_TUPLES_OK || PQnfields(result) != 5) {
        PQclear(result);
        return -1;
    }
    int count = PQntuples(result);
    struct user_row *rows = calloc(count > 0 ? (size_t)count : 1, sizeof(struct user_row));
    if (rows == NULL) {
        PQclear(result);
        return -1;
    }
    long long sum = 0;
    for (int row = 0; row < count; row++) {
        rows[row].id = strtoll(PQgetvalue(result, row, 0), NULL, 10);
        rows[row].version = strtoll(PQgetvalue(result, row, 1), NULL, 10);
        rows[row].user_id = copy_text(result, row, 2);
        rows[row].name = copy_text(result, row, 3);
        rows[row].has_age = !PQgetisnull(result, row, 4);
        rows[row].age = rows[row].has_age ? (int)strtol(PQgetvalue(result, row, 4), NULL, 10) : 0;
        sum += rows[row].age;
    }
    PQclear(result);
    for (int row = 0; row < count; row++) {
        free(rows[row].user_id);
        free(rows[row].name);
    }
    free(rows);
    *checksum = sum;
    return count;
}

void pgdatakit_c_floor_close(void *connection) { PQfinish((PGconn *)connection); }
