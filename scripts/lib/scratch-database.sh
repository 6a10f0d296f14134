# Sourced by the measurement scripts that work in a database of their own
# (scripts/save-statements, scripts/plan-cost):
#
#   scratch_database NAME   creates NAME_<pid> on $DATABASE_URL's server, drops it when
#                           the script exits, and sets `database` to its name and `url`
#                           to a URL of it (DATABASE_URL with that database).
scratch_database() {
    database="${1}_$$"
    psql "$DATABASE_URL" -qc "CREATE DATABASE $database" >/dev/null
    trap 'psql "$DATABASE_URL" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null' EXIT
    url="$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE_URL" "$database")"
}
