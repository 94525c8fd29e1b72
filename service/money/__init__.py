"""Money: what a campaign is charged, what it reserves, and the one writer of both.

* :mod:`.ledger`: the amount a model or judge call is charged (at most its bound; provider faults);
* :mod:`.costs`: a reported cost in nano-USD, the judge's expected cost per duel (c_J), a vote's fee;
* :mod:`.bounds`: the most a model or judge call may be charged (what a duel reserves);
* :mod:`.budget`: the budget's arithmetic (the ledger's capacity, spend + reserved <= budget,
  the budget spent);
* :mod:`.reserve`: what a new duel or a pre-generation call reserves, and
  :func:`.reserve.budget_decision`, the one check whether it fits (a duel's plan asks both in one
  call, :func:`.reserve.duel_budget`);
* :mod:`.holds`: budget holds of the calls that are not a duel's (pre-generation);
* :mod:`.charges`: the one writer of charge rows (a reuse's zero-cost row too) and campaign spend, whose statements both
  drivers of the vote cycle execute.

The package's ``__init__`` imports nothing: import a module (``from service.money import charges``).
"""
