"""llmduel service: campaigns over a SQL database behind a REST API."""
