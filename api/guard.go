package api

// The browser guard. A server on loopback without tokens trusts whoever
// reaches it, and a web page can reach it through the user's browser: by
// DNS rebinding (a name of the page's own that resolves to 127.0.0.1, so
// that the browser lets the page read the answers) or by a cross-site
// form or fetch that writes. So every request must name the server by a
// host it answers to (its Host header), and a browser's cross-origin
// write is refused — on every route, REST, /mcp and /ipfs/ alike.

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/memoria-ai/memoria/config"
)

type browserGuard struct {
	// hosts are the names the server answers to besides loopback ones;
	// nil: any (a server with tokens and no server.allowed_hosts).
	hosts   map[string]bool
	origins *http.CrossOriginProtection
}

func newBrowserGuard(c config.Server) *browserGuard {
	g := &browserGuard{origins: http.NewCrossOriginProtection()}
	for _, o := range c.AllowedOrigins {
		_ = g.origins.AddTrustedOrigin(o) // config.Validate checked them
	}
	if len(c.Auth.Tokens) > 0 && len(c.AllowedHosts) == 0 {
		return g
	}
	g.hosts = map[string]bool{}
	if host, _, err := net.SplitHostPort(c.Listen); err == nil && host != "" {
		g.hosts[strings.ToLower(strings.Trim(host, "[]"))] = true
	}
	for _, h := range c.AllowedHosts {
		g.hosts[strings.ToLower(h)] = true
	}
	return g
}

// check refuses a request that names the server by a host it does not
// answer to, or that a browser sends as a cross-origin write.
func (g *browserGuard) check(r *http.Request) *apiError {
	if g.hosts != nil && !g.answersTo(r.Host) {
		return &apiError{errForbidden, "forbidden_host", fmt.Sprintf(
			"this server does not answer to the host %q (add it to server.allowed_hosts if it is yours): a web page may be trying to reach it by DNS rebinding", r.Host)}
	}
	if err := g.origins.Check(r); err != nil {
		return &apiError{errForbidden, "forbidden_origin", fmt.Sprintf(
			"cross-origin %s from %q refused (add the origin to server.allowed_origins if it is yours): %v", r.Method, r.Header.Get("Origin"), err)}
	}
	return nil
}

// answersTo reports whether the server answers to host (a Host header:
// a name or IP, with an optional port).
func (g *browserGuard) answersTo(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.Trim(name, "[]"))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") || g.hosts[name] {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
