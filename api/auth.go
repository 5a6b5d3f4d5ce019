package api

// Authentication and authorization of every request on the listener:
// REST, /mcp and /ipfs/ (whoever mounts it) alike, because the check wraps
// the whole mux (Server.ServeHTTP) rather than each handler.
//
// A request names a route (the mux pattern it matches). Each route has a
// policy: the scope it needs and how it relates to sonas. Authentication
// and the scope are checked here, before the handler runs; the sona
// allow-list of a sona-scoped token is checked here for the routes that are
// not tied to one sona (they are refused), and by the shared operations
// (ops.go) for the routes that name a sona or a memory, because only they
// know which sona that is.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/memoria-ai/memoria/config"
)

// Scope is what a token may do; each scope includes the weaker ones.
type Scope int

// The scopes, weakest first.
const (
	ScopeNone Scope = iota
	ScopeRead
	ScopeWrite
	ScopeAdmin
)

func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

func parseScope(v string) Scope {
	switch v {
	case "read":
		return ScopeRead
	case "write":
		return ScopeWrite
	case "admin":
		return ScopeAdmin
	}
	return ScopeNone
}

// Principal is who a request acts as: a configured token, or the local
// user when no tokens are configured (loopback only) or over stdio.
type Principal struct {
	// Name is the token's name ("local" without tokens).
	Name  string
	Scope Scope
	// sonas is the allow-list; nil: every sona.
	sonas map[string]bool
}

// Local is the principal of a server without tokens and of `memoria mcp`
// over stdio: everything is allowed.
var Local = &Principal{Name: "local", Scope: ScopeAdmin}

// SonaScoped reports whether the principal is limited to some sonas.
func (p *Principal) SonaScoped() bool { return p.sonas != nil }

// MaySona reports whether the principal may use the sona with this uuid.
func (p *Principal) MaySona(id string) bool { return p.sonas == nil || p.sonas[id] }

// Sonas lists the allow-list in uuid order (nil: every sona).
func (p *Principal) Sonas() []string {
	if p.sonas == nil {
		return nil
	}
	ids := make([]string, 0, len(p.sonas))
	for id := range p.sonas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

type principalKey struct{}

// WithPrincipal returns ctx acting as p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom is the principal of ctx. A context without one may do
// nothing: every transport sets one.
func principalFrom(ctx context.Context) *Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok && p != nil {
		return p
	}
	return &Principal{Name: "nobody", Scope: ScopeNone, sonas: map[string]bool{}}
}

// HashToken is the form in which a token is stored in the config
// (config.Token.Hash): config.TokenHashPrefix and the hex SHA-256 of the
// token, what verification compares a presented token's hash with.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return config.TokenHashPrefix + hex.EncodeToString(sum[:])
}

// tokens verifies bearer tokens against the configured hashes.
type tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash      [sha256.Size]byte
	principal *Principal
}

func newTokens(c config.Auth) *tokens {
	t := &tokens{}
	for _, tc := range c.Tokens {
		var e tokenEntry
		raw, err := hex.DecodeString(strings.TrimPrefix(tc.Hash, config.TokenHashPrefix))
		if err != nil || len(raw) != sha256.Size {
			continue // Validate refuses such a config; never match it
		}
		copy(e.hash[:], raw)
		p := &Principal{Name: tc.Name}
		for _, sc := range tc.Scopes {
			p.Scope = max(p.Scope, parseScope(sc))
		}
		if len(tc.Sonas) > 0 {
			p.sonas = map[string]bool{}
			for _, id := range tc.Sonas {
				p.sonas[id] = true
			}
		}
		e.principal = p
		t.entries = append(t.entries, e)
	}
	return t
}

func (t *tokens) enabled() bool { return len(t.entries) > 0 }

// verify returns the principal of a presented token, or nil. It compares
// the token's hash with every entry in constant time, and does not stop at
// a match, so the time taken says nothing of which entry matched.
func (t *tokens) verify(token string) *Principal {
	sum := sha256.Sum256([]byte(token))
	var found *Principal
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].hash[:]) == 1 {
			found = t.entries[i].principal
		}
	}
	return found
}

// sonaRelation says how a route relates to sonas, for sona-scoped tokens.
type sonaRelation int

const (
	// global routes are not tied to one sona: refused to sona-scoped tokens.
	global sonaRelation = iota
	// bound routes name a sona or a memory (in the path, query or body);
	// the shared operations check it against the allow-list.
	bound
	// public routes need no token at all.
	public
)

// policy is what a route needs.
type policy struct {
	scope Scope
	sonas sonaRelation
}

// policies of the routes, by mux pattern. A pattern missing here (a route
// added without a policy) needs admin and is global: closed by default.
var policies = map[string]policy{
	"GET /healthz":                 {ScopeNone, public},
	"GET /ui":                      {ScopeNone, public}, // the web explorer's files hold no data (ui.go)
	"GET /ui/{file...}":            {ScopeNone, public},
	"GET /metrics":                 {ScopeAdmin, global},
	"GET /memory/{cid}":            {ScopeRead, bound},
	"GET /memory/{cid}/evaluation": {ScopeRead, bound},
	"GET /memory/{cid}/links":      {ScopeRead, bound}, // the web explorer's graph (ui.go)
	"GET /memories/list":           {ScopeRead, bound}, // ?sona= required for sona-scoped tokens
	"POST /memories":               {ScopeWrite, bound},
	"GET /sona/{uuid}":             {ScopeRead, bound},
	"GET /sona/{uuid}/tiers":       {ScopeRead, bound},
	"GET /sonas/list":              {ScopeRead, bound}, // lists only the allowed sonas
	"POST /sonas":                  {ScopeWrite, global},
	"POST /sona/{uuid}/chat":       {ScopeWrite, bound},
	"POST /sona/{uuid}/query":      {ScopeRead, bound},
	"POST /sona/{uuid}/recall":     {ScopeRead, bound},
	"POST /files":                  {ScopeWrite, bound}, // an upload reveals nothing
	"GET /file/{cid}":              {ScopeRead, bound},  // by a file memory's CID
	"POST /admin/heartbeat":        {ScopeAdmin, global},
	"POST /admin/compact":          {ScopeAdmin, global},
	"POST /admin/gc":               {ScopeAdmin, global},
	"GET /admin/storage":           {ScopeAdmin, global},
	"POST /admin/backup":           {ScopeAdmin, global},
	"GET /insights":                {ScopeRead, global},
	"POST /backbone":               {ScopeAdmin, global},
	"GET /backbone":                {ScopeRead, global},
	"POST /backbone/contribute":    {ScopeWrite, global},
	"GET /backbone/pending":        {ScopeRead, global},
	"GET /conflicts":               {ScopeRead, global},
	"POST /conflicts/{id}/resolve": {ScopeAdmin, global},
	"GET /export":                  {ScopeAdmin, global},
	"POST /import":                 {ScopeAdmin, global},
	"GET /anchors":                 {ScopeRead, global},
	"POST /forget":                 {ScopeWrite, bound}, // a sona's write scope forgets its own memories (forget.go)
	"GET /forgotten":               {ScopeAdmin, global},
	"GET /cluster":                 {ScopeRead, global}, // mounted by a cluster member (package cluster)
	"/mcp":                         {ScopeRead, bound},  // each tool and resource checks its own
}

// ipfsPolicy covers everything under /ipfs/, whatever patterns the
// gateway registers: blocks are read-only, and a content-addressed block is
// not tied to a sona, so sona-scoped tokens are refused the gateway (they
// read memories through /memory/{cid} and /file/{cid}).
var ipfsPolicy = policy{ScopeRead, global}

// routePolicy is the policy of a request that matched pattern.
func routePolicy(r *http.Request, pattern string) policy {
	if r.URL.Path == "/ipfs" || strings.HasPrefix(r.URL.Path, "/ipfs/") {
		return ipfsPolicy
	}
	if p, ok := policies[pattern]; ok {
		return p
	}
	return policy{ScopeAdmin, global}
}

// authorize decides a request before its handler: it returns the
// principal, or writes a 401/403 and returns nil. Unknown routes still
// need a valid token (a 404 says nothing to a stranger).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, pattern string) *Principal {
	if !s.tokens.enabled() {
		return Local
	}
	pol := routePolicy(r, pattern)
	if pattern != "" && pol.sonas == public {
		return &Principal{Name: "anonymous", Scope: ScopeNone, sonas: map[string]bool{}}
	}
	token, ok := bearer(r)
	if !ok {
		unauthorized(w, "send Authorization: Bearer <token>")
		return nil
	}
	p := s.tokens.verify(token)
	if p == nil {
		unauthorized(w, "the bearer token is not valid")
		return nil
	}
	if pattern == "" {
		return p // the mux answers 404/405
	}
	if p.Scope < pol.scope {
		writeError(w, http.StatusForbidden, "forbidden",
			fmt.Sprintf("token %q has scope %s; %s %s needs %s", p.Name, p.Scope, r.Method, r.URL.Path, pol.scope))
		return nil
	}
	if pol.sonas == global && p.SonaScoped() {
		writeError(w, http.StatusForbidden, "forbidden",
			fmt.Sprintf("token %q is limited to some sonas; %s %s is not tied to one sona", p.Name, r.Method, r.URL.Path))
		return nil
	}
	return p
}

// bearer reads the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="memoria"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", msg)
}

// forbidden is a 403 for the shared operations.
func forbidden(format string, args ...any) error {
	return &apiError{errForbidden, "forbidden", fmt.Sprintf(format, args...)}
}

// requireScope checks the principal of ctx has at least sc (the MCP tools
// check this themselves: /mcp only needs read).
func requireScope(ctx context.Context, sc Scope) error {
	p := principalFrom(ctx)
	if p.Scope < sc {
		return forbidden("token %q has scope %s; this needs %s", p.Name, p.Scope, sc)
	}
	return nil
}

// requireUnscoped refuses a sona-scoped principal an operation that is not
// tied to one sona.
func requireUnscoped(ctx context.Context, what string) error {
	if p := principalFrom(ctx); p.SonaScoped() {
		return forbidden("token %q is limited to some sonas; %s is not tied to one sona", p.Name, what)
	}
	return nil
}

// PolicyPatterns lists the routes with a policy of their own, sorted (the
// auth matrix test covers each).
func PolicyPatterns() []string {
	out := make([]string, 0, len(policies))
	for p := range policies {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
