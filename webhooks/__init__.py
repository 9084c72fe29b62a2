"""Validating admission webhooks: AdmissionReview in, allowed or denied out.

`create_app()` is the listener's FastAPI app (`POST /validate/{plural}` for every kind in `app.api.KINDS`);
`decide()` is the decision for one request, pure, for any caller.
"""

from __future__ import annotations

from webhooks.app import MAX_BODY, create_app
from webhooks.review import AdmissionRequest, AdmissionReview, ReviewError, parse_review, review_response
from webhooks.validate import Decision, decide

__all__ = [
    "MAX_BODY",
    "AdmissionRequest",
    "AdmissionReview",
    "Decision",
    "ReviewError",
    "create_app",
    "decide",
    "parse_review",
    "review_response",
]
