"""The HTTP status of each domain error (service/api/errors.py)."""

from __future__ import annotations

from service.api.errors import domain_status
from service.campaigns.types import CampaignEnded, Conflict, DomainError, Forbidden, NotFound, Unprocessable


def test_each_domain_error_has_its_http_status():
    assert [
        domain_status(e("x")) for e in (NotFound, Conflict, CampaignEnded, Forbidden, Unprocessable, DomainError)
    ] == [404, 409, 409, 403, 422, 400]
    assert not hasattr(DomainError("x"), "status_code")
