"""One JSON line of catalog growth for the soak: rows, table and index bytes per table.
Usage: python bench/soak_stats.py postgres PSQL_BIN URL | python bench/soak_stats.py sqlite PATH"""
import json
import os
import sqlite3
import subprocess
import sys

kind = sys.argv[1]
if kind == "postgres":
    psql, url = sys.argv[2], sys.argv[3]
    sql = """
    SELECT coalesce(json_object_agg(relname, json_build_object(
      'rows', (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I', relname), false, true, '')))[1]::text::bigint,
      'table_bytes', pg_table_size(relid), 'index_bytes', pg_indexes_size(relid))), '{}')
    FROM pg_stat_user_tables WHERE schemaname = 'public' AND relname <> '_sqlx_migrations'"""
    out = subprocess.run([psql, url, "-Atqc", sql], check=True, capture_output=True, text=True).stdout.strip()
    tables = json.loads(out)
    db_bytes = int(subprocess.run([psql, url, "-Atqc", "SELECT pg_database_size(current_database())"],
                                  check=True, capture_output=True, text=True).stdout.strip())
else:
    path = sys.argv[2]
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'")]
    tables = {n: {"rows": con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]} for n in names}
    db_bytes = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
print(json.dumps({"db_bytes": db_bytes, "tables": tables}))
