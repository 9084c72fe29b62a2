"""kflare: Cloudflare as Kubernetes custom resources."""

__version__ = "0.2.2"
