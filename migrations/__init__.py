"""Alembic migrations of the llmduel schema, shipped in the wheel so an installed
``llmduel db upgrade`` finds them (service/db.py points alembic's script_location here)."""
