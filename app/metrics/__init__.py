"""The metrics endpoint, one job per module, as controller-runtime splits `metrics` from `metrics/filters`:

- `app.metrics.collectors`: what a scrape returns (the process', the listeners' HTTP, the Cloudflare budgets',
  the resources' and the event loop's series), all in `app.kube.metrics.REGISTRY`;
- `app.metrics.authz`: who may scrape (TokenReview and SubjectAccessReview, their cache, the ASGI filter);
- `app.metrics.listener`: the FastAPI app at `/metrics` and the uvicorn listener that serves it.
"""
