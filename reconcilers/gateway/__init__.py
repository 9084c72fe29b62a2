"""The `cloudflare-tunnel` Gateway class: Gateway API objects translated into the tunnel's ingress document,
DNSRecords, Envoy's configuration over xDS and the Gateway API statuses."""
