"""The decisions of a vote cycle, over plain data (no database, no I/O).

A vote cycle has three locked steps: *plan* a duel (:mod:`.plan`), *store* its
answers (:mod:`.answers`), *record* its verdict (:mod:`.verdict`). Each module
decides its step from plain values (the locked campaign row's fields, the duel's
fields, the in-flight duels as rows with attributes) and returns what to do: an
error to raise, an ending to write, or the values to write. The plan and verdict
sequences of :mod:`service.cycle` (on either driver) and the answers transaction
(:meth:`service.cycle.orchestration.Cycle.store_answers_tx`) call these
functions and only read and write.
"""
