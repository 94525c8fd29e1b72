"""Data files shipped with the service (package data).

``litellm_prices.json``: per-token prices of common chat models in LiteLLM's
price-map format (keys like ``"gpt-4o"``, ``"claude-sonnet-4-5"``,
``"gemini/gemini-2.5-pro"``, ``"deepseek/deepseek-chat"``; values with
``input_cost_per_token``, ``output_cost_per_token`` in USD, ``litellm_provider``,
``max_input_tokens``, ``max_output_tokens``, ``mode``).

Source: LiteLLM's ``model_prices_and_context_window.json``
(https://github.com/BerriAI/litellm, branch main) as copied on
2026-07-24 18:23 UTC by https://github.com/RoCry/llm-api-price (an unmodified
copy plus a ``last_updated`` field). 54 entries were kept (OpenAI, Anthropic,
Google Gemini API, Mistral, DeepSeek, and Llama models on Groq, Together AI and
Fireworks), each with the six fields above only. Prices change: a campaign's
``price_map`` field or the file named by ``LLMDUEL_PRICE_MAP`` overrides any
entry (docs/service.md, Pricing).
"""

PRICES_FILE = "litellm_prices.json"
PRICES_SOURCE = (
    "LiteLLM model_prices_and_context_window.json (github.com/BerriAI/litellm), copy of 2026-07-24 18:23 UTC"
)
