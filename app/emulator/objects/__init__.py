"""The rules of each object type, independent of HTTP: validation, normalisation, uniqueness, quotas, rendering.

Routes and the seeder both go through these functions, so a seeded object is exactly what the API would have made.
"""
