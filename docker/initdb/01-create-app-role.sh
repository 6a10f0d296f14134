#!/bin/bash
# Runs once, when the volume is first initialised: creates the non-superuser application
# role and its database. The password comes from the environment, never from this file.
set -euo pipefail

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v app_password="$PGDATAKIT_DB_PASSWORD" <<'SQL'
CREATE ROLE pgdatakit LOGIN NOSUPERUSER CREATEDB NOCREATEROLE PASSWORD :'app_password';
CREATE DATABASE pgdatakit OWNER pgdatakit;
SQL
