#ifndef PGDATAKIT_CFETCHFLOOR_H
#define PGDATAKIT_CFETCHFLOOR_H

/* The fetch benchmark's second floor: the same rows read by a C program with libpq
   alone (pgdatakit-bench fetch). */

/* Connects with a libpq connection string or URI; NULL when that fails. */
void *pgdatakit_c_floor_open(const char *conninfo);

/* Runs `sql` (rows of id, version, user_id, name, age), decodes every row into a C
   struct as a C program would hold it (integers parsed, strings copied), adds up the
   non-null ages into *checksum, frees them, and returns the number of rows (-1 on an
   error). */
long long pgdatakit_c_floor_scan(void *connection, const char *sql, long long *checksum);

/* Closes a connection from pgdatakit_c_floor_open. */
void pgdatakit_c_floor_close(void *connection);

#endif
