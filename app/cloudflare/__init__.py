"""The async Cloudflare v4 client: one shared HTTP/2 client per process with bounded calls, envelope unwrapping into
typed results and typed errors, a per-token call budget shared by every caller, and pagination helpers.

It knows nothing of Kubernetes. Start at `CloudflareSession` (once per process) and `CloudflareClient` (per token).
"""

from app.clock import Clock, MonotonicClock
from app.cloudflare.budget import BudgetConfig, BudgetRegistry, BudgetStats, TokenBudget
from app.cloudflare.client import CloudflareClient
from app.cloudflare.envelope import ApiResponse, RateLimitHeaders
from app.cloudflare.errors import (
    CODE_CLASSES,
    STATUS_CLASSES,
    BadResponse,
    CloudflareError,
    Conflict,
    DeadlineExceeded,
    ErrorDetail,
    InvalidToken,
    NetworkError,
    NotFound,
    Outcome,
    PermissionDenied,
    QuotaExceeded,
    RateLimited,
    Terminal,
    Transient,
    classify,
)
from app.cloudflare.http import DEFAULT_BASE_URL, CloudflareHTTP, HttpConfig, RawResponse, Timeouts
from app.cloudflare.models import (
    Account,
    CloudflareModel,
    Deleted,
    DNSBatchResult,
    DNSRecord,
    Ref,
    TokenStatus,
    Zone,
)
from app.cloudflare.pagination import PageStyle, paginate, paginate_cursor, paginate_pages, paginate_single
from app.cloudflare.secret import Secret
from app.cloudflare.session import CloudflareSession

__all__ = [
    "CODE_CLASSES",
    "DEFAULT_BASE_URL",
    "STATUS_CLASSES",
    "Account",
    "ApiResponse",
    "BadResponse",
    "BudgetConfig",
    "BudgetRegistry",
    "BudgetStats",
    "Clock",
    "CloudflareClient",
    "CloudflareError",
    "CloudflareHTTP",
    "CloudflareModel",
    "CloudflareSession",
    "Conflict",
    "DNSBatchResult",
    "DNSRecord",
    "DeadlineExceeded",
    "Deleted",
    "ErrorDetail",
    "HttpConfig",
    "InvalidToken",
    "MonotonicClock",
    "NetworkError",
    "NotFound",
    "Outcome",
    "PageStyle",
    "PermissionDenied",
    "QuotaExceeded",
    "RateLimitHeaders",
    "RateLimited",
    "RawResponse",
    "Ref",
    "Secret",
    "Terminal",
    "Timeouts",
    "TokenBudget",
    "TokenStatus",
    "Transient",
    "Zone",
    "classify",
    "paginate",
    "paginate_cursor",
    "paginate_pages",
    "paginate_single",
]
