// A stand-in for cloudflared in the data plane's pod, for clusters that cannot reach Cloudflare's edge (nor a
// registry holding cloudflared's image). It is run exactly as the chart runs cloudflared (`cloudflared tunnel
// --no-autoupdate --protocol http2 --metrics ADDR run`, TUNNEL_TOKEN in its environment) and plays both the
// edge and the connector:
//
//   - the token is decoded as cloudflared decodes it (base64 of {"a": account, "t": tunnel ID, "s": secret}), and
//     a missing or malformed one ends the process, as it ends cloudflared;
//   - on the metrics address, `/ready` answers 200 once the edge has pushed a remote configuration (cloudflared is
//     ready once connected, which is when the edge pushes it) and 503 before; `/metrics` answers, and so do
//     `/config` (the configuration in force) and `/debug/pprof/`, as cloudflared's do, so that a test can see that
//     only the first two are reachable from outside the pod;
//   - on CONTROL_ADDRESS (default :7845), `PUT /configuration` is the edge's push: the tunnel's configuration as
//     Cloudflare's API returns it (`tunnel_id`, `version`, `config.ingress`), refused for another tunnel than the
//     token's;
//   - on EDGE_ADDRESS (default :7844), each request is a visitor's, as the edge hands it over: HTTP/1.1 or
//     cleartext HTTP/2, with its Host header. The first ingress rule matching host and path takes it, as in
//     cloudflared; the headers the edge adds are set (CF-Connecting-IP, X-Forwarded-For, X-Forwarded-Proto https,
//     CF-Visitor, CF-Ray, CDN-Loop), and the request goes to the rule's service through Go's HTTP transport, as
//     cloudflared's does: HTTP/1.1, or HTTP/2 when `originRequest.http2Origin` is set and the origin is https (Go's
//     transport has no cleartext HTTP/2, neither has cloudflared), TLS checked unless `noTLSVerify`, against
//     `originServerName` when set. `http_status:N` answers N.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

type token struct {
	Account string `json:"a"`
	Tunnel  string `json:"t"`
	Secret  string `json:"s"`
}

type originRequest struct {
	HTTP2Origin      bool   `json:"http2Origin"`
	NoTLSVerify      bool   `json:"noTLSVerify"`
	OriginServerName string `json:"originServerName"`
	CAPool           string `json:"caPool"`
	HTTPHostHeader   string `json:"httpHostHeader"`
}

type ruleSpec struct {
	Hostname      string         `json:"hostname"`
	Path          string         `json:"path"`
	Service       string         `json:"service"`
	OriginRequest *originRequest `json:"originRequest"`
}

type pushed struct {
	TunnelID string `json:"tunnel_id"`
	Version  int    `json:"version"`
	Config   struct {
		Ingress       []ruleSpec     `json:"ingress"`
		OriginRequest *originRequest `json:"originRequest"`
	} `json:"config"`
}

type rule struct {
	spec   ruleSpec
	path   *regexp.Regexp
	status int
	proxy  *httputil.ReverseProxy
}

type ingress struct {
	version int
	rules   []rule
}

func decodeToken(value string) (token, error) {
	var t token
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil {
		return t, fmt.Errorf("not base64: %w", err)
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return t, fmt.Errorf("not a tunnel token: %w", err)
	}
	if t.Account == "" || t.Tunnel == "" || t.Secret == "" {
		return t, errors.New("a tunnel token needs an account tag, a tunnel ID and a secret")
	}
	return t, nil
}

func transport(opts originRequest) (*http.Transport, error) {
	config := &tls.Config{InsecureSkipVerify: opts.NoTLSVerify, ServerName: opts.OriginServerName} //nolint:gosec // noTLSVerify is the rule's own choice
	if opts.CAPool != "" {
		pem, err := os.ReadFile(opts.CAPool)
		if err != nil {
			return nil, fmt.Errorf("caPool: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("caPool: no certificate")
		}
		config.RootCAs = pool
	}
	// cloudflared's origin defaults: 30s to connect, 10s for TLS, keep-alive connections kept 90s.
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       config,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   100,
		ForceAttemptHTTP2:     opts.HTTP2Origin,
	}, nil
}

func compile(doc pushed) (*ingress, error) {
	specs := doc.Config.Ingress
	if len(specs) == 0 {
		return nil, errors.New("no ingress rules")
	}
	last := specs[len(specs)-1]
	if (last.Hostname != "" && last.Hostname != "*") || last.Path != "" {
		return nil, errors.New("the last ingress rule must match every request")
	}
	out := &ingress{version: doc.Version}
	for i, spec := range specs {
		r := rule{spec: spec}
		if spec.Path != "" {
			re, err := regexp.Compile(spec.Path)
			if err != nil {
				return nil, fmt.Errorf("rule %d: path: %w", i, err)
			}
			r.path = re
		}
		switch {
		case strings.HasPrefix(spec.Service, "http_status:"):
			code, err := strconv.Atoi(strings.TrimPrefix(spec.Service, "http_status:"))
			if err != nil {
				return nil, fmt.Errorf("rule %d: %w", i, err)
			}
			r.status = code
		case strings.HasPrefix(spec.Service, "http://"), strings.HasPrefix(spec.Service, "https://"):
			target, err := url.Parse(spec.Service)
			if err != nil {
				return nil, fmt.Errorf("rule %d: %w", i, err)
			}
			opts := originRequest{}
			if doc.Config.OriginRequest != nil {
				opts = *doc.Config.OriginRequest
			}
			if spec.OriginRequest != nil {
				opts = *spec.OriginRequest
			}
			rt, err := transport(opts)
			if err != nil {
				return nil, fmt.Errorf("rule %d: %w", i, err)
			}
			host := opts.HTTPHostHeader
			r.proxy = &httputil.ReverseProxy{
				Transport: rt,
				Rewrite: func(pr *httputil.ProxyRequest) {
					pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
					pr.Out.Host = pr.In.Host
					if host != "" {
						pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
						pr.Out.Host = host
					}
					// Rewrite drops the hop-by-hop and forwarding headers; the edge's are put back as it sends them.
					for _, name := range edgeHeaders {
						if v := pr.In.Header.Values(name); len(v) > 0 {
							pr.Out.Header[name] = v
						}
					}
				},
				FlushInterval: -1,
			}
		default:
			return nil, fmt.Errorf("rule %d: service %q is not one this stand-in serves", i, spec.Service)
		}
		out.rules = append(out.rules, r)
	}
	return out, nil
}

var edgeHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "Cf-Connecting-Ip", "Cf-Visitor", "Cf-Ray", "Cdn-Loop"}

func (r rule) matches(host, path string) bool {
	name := strings.ToLower(r.spec.Hostname)
	switch {
	case name == "" || name == "*":
	case strings.HasPrefix(name, "*."):
		if !strings.HasSuffix(host, name[1:]) {
			return false
		}
	case name != host:
		return false
	}
	return r.path == nil || r.path.MatchString(path)
}

func rayID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "-KFL"
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "tunnel" {
		log.Fatalf("usage: cloudflared tunnel [flags] run")
	}
	flags := flag.NewFlagSet("tunnel", flag.ExitOnError)
	metrics := flags.String("metrics", "localhost:2000", "address of the metrics and readiness server")
	flags.Bool("no-autoupdate", false, "ignored: a stand-in never updates")
	flags.String("protocol", "auto", "ignored: the edge's requests arrive as HTTP/1.1 or cleartext HTTP/2")
	if err := flags.Parse(args[1:]); err != nil {
		log.Fatal(err)
	}
	if flags.Arg(0) != "run" {
		log.Fatalf("only `tunnel run` is served, not %q", flags.Args())
	}
	tok, err := decodeToken(os.Getenv("TUNNEL_TOKEN"))
	if err != nil {
		log.Fatalf("TUNNEL_TOKEN: %v", err)
	}
	log.Printf("tunnel %s of account %s", tok.Tunnel, tok.Account)

	var current atomic.Pointer[ingress]
	control := http.NewServeMux()
	control.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		connections := 0
		if current.Load() != nil {
			connections = 1
		}
		status := http.StatusOK
		if connections == 0 {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]int{"status": status, "readyConnections": connections})
	})
	control.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		connections := 0
		if current.Load() != nil {
			connections = 1
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE cloudflared_tunnel_ha_connections gauge\ncloudflared_tunnel_ha_connections %d\n", connections)
	})
	var pushedDoc atomic.Pointer[pushed]
	control.HandleFunc("GET /config", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(pushedDoc.Load())
	})
	control.HandleFunc("GET /debug/pprof/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("profiles\n"))
	})
	edgeControl := http.NewServeMux()
	edgeControl.HandleFunc("PUT /configuration", func(w http.ResponseWriter, r *http.Request) {
		var doc pushed
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&doc); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if doc.TunnelID != tok.Tunnel {
			http.Error(w, fmt.Sprintf("configuration of tunnel %s, this connector runs %s", doc.TunnelID, tok.Tunnel), http.StatusConflict)
			return
		}
		compiled, err := compile(doc)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		current.Store(compiled)
		pushedDoc.Store(&doc)
		log.Printf("configuration version %d: %d ingress rules", doc.Version, len(compiled.rules))
		w.WriteHeader(http.StatusNoContent)
	})

	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		config := current.Load()
		if config == nil {
			http.Error(w, "no configuration pushed yet", http.StatusBadGateway)
			return
		}
		visitor, _, _ := net.SplitHostPort(r.RemoteAddr)
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		// What the edge tells the origin of the visitor; whatever the visitor claimed in these is replaced.
		r.Header.Set("Cf-Connecting-Ip", visitor)
		r.Header.Set("X-Forwarded-For", visitor)
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("Cf-Visitor", `{"scheme":"https"}`)
		r.Header.Set("Cf-Ray", rayID())
		r.Header.Set("Cdn-Loop", "cloudflare")
		for _, rl := range config.rules {
			if !rl.matches(host, r.URL.Path) {
				continue
			}
			if rl.proxy == nil {
				w.WriteHeader(rl.status)
				return
			}
			rl.proxy.ServeHTTP(w, r)
			return
		}
		http.Error(w, "no ingress rule matched", http.StatusBadGateway)
	})

	edgeAddress := os.Getenv("EDGE_ADDRESS")
	if edgeAddress == "" {
		edgeAddress = ":7844"
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	controlAddress := os.Getenv("CONTROL_ADDRESS")
	if controlAddress == "" {
		controlAddress = ":7845"
	}
	servers := []*http.Server{
		{Addr: *metrics, Handler: control, ReadHeaderTimeout: 10 * time.Second},
		{Addr: controlAddress, Handler: edgeControl, ReadHeaderTimeout: 10 * time.Second},
		{Addr: edgeAddress, Handler: edge, Protocols: protocols, ReadHeaderTimeout: 10 * time.Second},
	}
	failed := make(chan error, len(servers))
	for _, s := range servers {
		go func() { failed <- s.ListenAndServe() }()
	}
	log.Printf("metrics on %s, the edge's requests on %s, its pushes on %s", *metrics, edgeAddress, controlAddress)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-failed:
		log.Fatal(err)
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}
