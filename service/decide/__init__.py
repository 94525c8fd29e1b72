"""The decisions of a vote cycle, over plain data (no database, no I/O).

A vote cycle has three locked steps: *plan* a duel (:mod:`.plan`), *store* its
answers (:mod:`.answers`), *record* its verdict (:mod:`.verdict`). Each module
decides its step from plain values (the locked campaign row's fields, the duel's
fields, the in-flight duels as rows with attributes) and returns what to do: an
error to raise, an ending to write, or the values to write. The transactions that
read and write the database (the ORM transactions in
:mod:`service.campaigns.transactions` and the hot path's drivers in
:mod:`service.cycle`) call these functions and only read and write.
"""
