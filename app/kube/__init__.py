"""The Kubernetes runtime: API client, informers, work queues, leader election, events, drift scheduling."""
