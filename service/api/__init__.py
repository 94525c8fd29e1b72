"""REST API v1 routers and error handling."""

from .errors import install_error_handlers
from .routes import router

__all__ = ["install_error_handlers", "router"]
