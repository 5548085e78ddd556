"""Problem details (RFC 9457): every answer of the HTTP ingest server other than 200.
Split from :mod:`acidstream.ingest.http.app` (which re-exports :class:`Problem`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse, Response

__all__ = ["PROBLEM_JSON", "Problem"]

PROBLEM_JSON = "application/problem+json"


class Problem(Exception):
    """An answer other than 200, as problem details (RFC 9457)."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail = status, title, detail
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def response(self, instance: str) -> Response:
        slug = self.title.lower().replace(" ", "-")
        body = {
            "type": f"urn:acidstream:http:{slug}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
            **self.extra,
        }
        return JSONResponse(body, self.status, headers=self.headers, media_type=PROBLEM_JSON)
