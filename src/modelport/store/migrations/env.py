"""Alembic's environment: migrations run on the connection modelport hands over at start-up."""

from __future__ import annotations

from alembic import context

from modelport.store.tables import metadata

connection = context.config.attributes["connection"]
# SQLite alters tables by copying them ("batch mode"); PostgreSQL alters them in place.
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
