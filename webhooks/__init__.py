"""Validating admission webhooks: AdmissionReview in, allowed or denied out."""
