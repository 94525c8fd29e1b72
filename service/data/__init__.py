"""Data files shipped with the service (package data).

``litellm_prices.json``: LiteLLM's whole model price map (``model_prices_and_context_window.json``,
https://github.com/BerriAI/litellm, MIT licence) as of LiteLLM 1.109.1, reduced by
:mod:`service.data.build_price_map` to the fields llmduel reads: per-token input and
output prices, per-request and search fees, per-image prices, ``litellm_provider``,
``mode`` and ``max_output_tokens``. Its first entry, ``_llmduel_provenance``, records
the source, version, date, licence, the command that built it and the SHA-256 of
the input. Rebuild it from a newer map with
``python -m service.data.build_price_map PATH``. When a ``litellm`` package is
installed, :func:`service.pricing.base_map` reads that package's map instead.
Prices change: a campaign's ``price_map`` field or the file named by
``LLMDUEL_PRICE_MAP`` overrides any entry (docs/clients-and-judges.md, *Prices*).
"""

PRICES_FILE = "litellm_prices.json"
#: The map inside an installed litellm package (its offline copy of the map).
LITELLM_PACKAGE_FILE = "model_prices_and_context_window_backup.json"
