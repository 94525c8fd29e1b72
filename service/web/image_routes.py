"""Images on the pages: the voting page's and the dashboard's image URLs, and the template filters.

A prompt's images and an image model's answers are named in the duel's texts by their sha256
(``[image sha256:<hex>]``, service/prompts.py, service/clients/images.py). The pages never show
those names: they show each image under a URL made of the duel and a *slot*, ``a`` or ``b`` (an
image answer) or ``p1``, ``p2``, ... (the prompt's images in the order of the text):

* ``GET /annotate/{token}/images/{duel}/{slot}``: for the annotator behind the link, a duel it
  may see (the REST API's own check, ``Views.get_duel``);
* ``GET /campaigns/{cid}/duels/{duel}/images/{slot}``: for the dashboard's reader.

Both answer the image's *blind copy* (re-encoded, no metadata: service/images/checks.py), so
the bytes carry no provider text chunk naming a model. **choice**: a URL names the duel, not the
image, so the same picture in two duels has two addresses and an annotator cannot join answers
across duels by their URLs (docs/guide.md, *Image campaigns*).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..campaigns import DomainError
from ..images.store import blind_copies
from ..models import Duel
from .image_text import slot_hash
from .routes import _annotator, _bad_token, _campaigns, _guard, _headers, _parse_id, _t

router = APIRouter(include_in_schema=False)

#: A blind copy never changes for a URL (a duel's texts never change): the browser may keep it.
IMAGE_CACHE = "private, max-age=86400, immutable"


def _blind(svc, sha: str) -> tuple[str, bytes] | None:
    with svc.db.read() as s:
        return blind_copies(s, [sha]).get(sha)


def _image_response(found: tuple[str, bytes] | None) -> Response:
    if found is None:
        return Response(status_code=404, headers=_headers())
    media_type, data = found
    return Response(data, media_type=media_type, headers=_headers({"Cache-Control": IMAGE_CACHE}, private=False))


@router.get("/annotate/{token}/images/{duel_id}/{slot}")
async def annotator_image(request: Request, token: str, duel_id: str, slot: str):
    principal = await _annotator(request, token)
    if principal is None:
        return _bad_token(request)
    did = _parse_id(duel_id)
    if did is None:
        return _image_response(None)
    svc = _campaigns(request)
    try:
        view = await _t(svc.views.get_duel, did, principal, True)  # its stored image names, once allowed
    except DomainError:
        return _image_response(None)
    sha = slot_hash(view.get("prompt"), view.get("answer_a"), view.get("answer_b"), slot)
    return _image_response(None if sha is None else await _t(_blind, svc, sha))


@router.get("/campaigns/{cid}/duels/{duel_id}/images/{slot}")
async def dashboard_image(request: Request, cid: str, duel_id: str, slot: str):
    denied = await _guard(request)
    if denied is not None:
        return denied
    campaign_id, did = _parse_id(cid), _parse_id(duel_id)
    if campaign_id is None or did is None:
        return _image_response(None)
    svc = _campaigns(request)

    def find() -> tuple[str, bytes] | None:
        with svc.db.read() as s:
            d = s.get(Duel, did)
            if d is None or d.campaign_id != campaign_id:
                return None
            sha = slot_hash(d.prompt, d.answer_a, d.answer_b, slot)
            return None if sha is None else blind_copies(s, [sha]).get(sha)

    return _image_response(await _t(find))
