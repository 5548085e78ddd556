#!/usr/bin/env bash
# Start the local services the test suite talks to (PostgreSQL on 127.0.0.1:5432)
# and create the `test` database if it is missing. Idempotent.
set -euo pipefail
if command -v pg_isready >/dev/null 2>&1; then
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  if pg_isready -q -h 127.0.0.1 -p 5432; then
    if ! psql -h 127.0.0.1 -U postgres -tAc "select 1 from pg_database where datname='test'" postgres | grep -q 1; then
      psql -h 127.0.0.1 -U postgres -c "create database test" postgres
    fi
    echo "services: PostgreSQL is up on 127.0.0.1:5432"
  else
    echo "services: PostgreSQL could not be started; postgres tests will skip with a reason"
  fi
else
  echo "services: no PostgreSQL client tools found; postgres tests will skip with a reason"
fi
