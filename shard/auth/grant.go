package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shardlimit/shardlimit/shard/key"
)

// Role is what an identity may do.
type Role string

// The roles.
const (
	// RoleService may check, and read the limited users and hot keys of,
	// only the services of its grant.
	RoleService Role = "service"
	// RoleOperator may manage rules and grants, rebalance, reset counters
	// and roll the shard map back, and act as a service for every service.
	RoleOperator Role = "operator"
	// RoleInternal is the routers' and the rebalance job's: the only role
	// that may call the shard API.
	RoleInternal Role = "internal"
)

// Roles lists the roles, in the order messages name them.
var Roles = []Role{RoleService, RoleOperator, RoleInternal}

// Bounds on a grant.
const (
	// MaxIDLength bounds an identity id in bytes: a certificate's SAN URI
	// or DNS name, or a name chosen for a token-only caller.
	MaxIDLength = 256
	// MaxServices bounds the services of one grant.
	MaxServices = 1000
	// MaxTokens bounds the tokens of one identity: enough to rotate
	// several callers that share it, few enough to keep a grant small.
	MaxTokens = 16
)

// ErrInvalidGrant marks every grant that fails validation.
var ErrInvalidGrant = errors.New("invalid grant")

// Grant is one identity's role and, for the service role, its services.
// It is stored in etcd at grants/<id> and given in grants files.
type Grant struct {
	// ID identifies the caller and names its kind (see Kind): uri:<SAN
	// URI of its client certificate>, dns:<DNS name of its client
	// certificate> or token:<any name>, for a caller that presents only
	// tokens. An id without a kind, as grants were written before kinds,
	// is read by CanonicalID: a URI grant if it parses as an absolute URI,
	// else a token grant. Required; printable ASCII without spaces, at
	// most MaxIDLength bytes.
	ID string `yaml:"id" json:"id"`
	// Role is service, operator or internal. Required.
	Role Role `yaml:"role" json:"role"`
	// Services the identity may check and read; required for the service
	// role, empty for the others (an operator has every service).
	Services []string `yaml:"services,omitempty" json:"services,omitempty"`
	// Tokens are the bearer tokens that authenticate as this identity,
	// stored as hashes only.
	Tokens []Token `yaml:"tokens,omitempty" json:"tokens,omitempty"`
}

// Token is a bearer token of an identity, as stored: its hash, never the
// token.
type Token struct {
	// ID names the token in lists and revocations; not secret.
	ID string `yaml:"id" json:"id"`
	// SHA256 is the hex SHA-256 of the token.
	SHA256 string `yaml:"sha256" json:"sha256"`
	// Created is when the token was made.
	Created time.Time `yaml:"created" json:"created"`
	// Expires is when the token stops authenticating; zero: never.
	Expires time.Time `yaml:"expires,omitempty" json:"expires,omitzero"`
}

// Validate reports every problem of g, each naming its field.
func (g *Grant) Validate() error {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if err := checkID(g.ID); err != nil {
		bad("id", "%v", err)
	}
	switch g.Role {
	case RoleService:
		if len(g.Services) == 0 {
			bad("services", "at least one is required for role service")
		}
	case RoleOperator, RoleInternal:
		if len(g.Services) > 0 {
			bad("services", "only role service holds services; role %s has them all or none", g.Role)
		}
	case "":
		bad("role", "required: one of service, operator, internal")
	default:
		bad("role", "%q is not one of service, operator, internal", g.Role)
	}
	if len(g.Services) > MaxServices {
		bad("services", "%d exceed the maximum of %d", len(g.Services), MaxServices)
	}
	seen := map[string]bool{}
	for i, s := range g.Services {
		switch {
		case s == "":
			bad(fmt.Sprintf("services[%d]", i), "empty")
		case len(s) > key.MaxServiceLength:
			bad(fmt.Sprintf("services[%d]", i), "%d bytes exceed the maximum of %d", len(s), key.MaxServiceLength)
		case strings.Contains(s, "/") || !utf8.ValidString(s):
			bad(fmt.Sprintf("services[%d]", i), "must be valid UTF-8 without '/'")
		case seen[s]:
			bad(fmt.Sprintf("services[%d]", i), "%q is listed twice", s)
		}
		seen[s] = true
	}
	if len(g.Tokens) > MaxTokens {
		bad("tokens", "%d exceed the maximum of %d", len(g.Tokens), MaxTokens)
	}
	ids := map[string]bool{}
	for i, t := range g.Tokens {
		f := fmt.Sprintf("tokens[%d]", i)
		if t.ID == "" || len(t.ID) > 64 || !printable(t.ID) {
			bad(f+".id", "required: 1..64 printable characters")
		} else if ids[t.ID] {
			bad(f+".id", "%q is listed twice", t.ID)
		}
		ids[t.ID] = true
		if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != sha256.Size {
			bad(f+".sha256", "not a hex SHA-256 (64 hex digits)")
		}
		if !t.Expires.IsZero() && !t.Expires.After(t.Created) {
			bad(f+".expires", "must be after created")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidGrant, strings.Join(errs, "; "))
	}
	return nil
}

// checkID accepts an identity id: 1..MaxIDLength printable ASCII
// characters without spaces, whose name, if it names its kind, is one of
// that kind.
func checkID(id string) error {
	switch {
	case id == "":
		return errors.New("required")
	case len(id) > MaxIDLength:
		return fmt.Errorf("%d bytes exceed the maximum of %d", len(id), MaxIDLength)
	case !printable(id):
		return errors.New("must be printable ASCII without spaces")
	}
	kind, name, _ := ParseID(id)
	switch {
	case name == "":
		return fmt.Errorf("%s: a name is required after the kind", kind)
	case kind == KindURI && !isAbsoluteURI(name):
		return fmt.Errorf("uri: %q is not an absolute URI (scheme:...)", name)
	case kind == KindDNS && !isDNSName(name):
		return fmt.Errorf("dns: %q is not a DNS name (letters, digits, '-', '_', '*' and dots)", name)
	}
	return nil
}

// Kind is how an identity authenticates: its grant's id names it, and a
// caller matches grants of its own kind only.
type Kind string

// The kinds of identity.
const (
	// KindURI: a SAN URI of a verified client certificate ("uri:spiffe://shardlimit/router").
	KindURI Kind = "uri"
	// KindDNS: a SAN DNS name of a verified client certificate
	// ("dns:envoy.example.com"), compared without case. It never
	// matches a URI or token grant, and only a grant that says dns:
	// names one.
	KindDNS Kind = "dns"
	// KindToken: a caller that presents only bearer tokens ("token:shop");
	// no certificate matches it.
	KindToken Kind = "token"
)

// Kinds lists the kinds, in the order messages name them.
var Kinds = []Kind{KindURI, KindDNS, KindToken}

// ParseID splits an identity id into its kind and name. An id that does
// not start with "uri:", "dns:" or "token:" was written before kinds; it
// is read as a URI grant if it parses as an absolute URI (a scheme, then
// ':'), else as a token grant (explicit false). A DNS grant must always
// say dns:.
func ParseID(id string) (kind Kind, name string, explicit bool) {
	for _, k := range Kinds {
		if rest, ok := strings.CutPrefix(id, string(k)+":"); ok {
			if k == KindDNS {
				rest = strings.ToLower(rest)
			}
			return k, rest, true
		}
	}
	if isAbsoluteURI(id) {
		return KindURI, id, false
	}
	return KindToken, id, false
}

// CanonicalID returns id naming its kind: "uri:<uri>", "dns:<name>" (in
// lower case) or "token:<name>" (see ParseID).
func CanonicalID(id string) string {
	kind, name, _ := ParseID(id)
	return string(kind) + ":" + name
}

// URIID, DNSID and TokenID return the identity id of a certificate's SAN
// URI, of its SAN DNS name, and of a token holder's name.
func URIID(uri string) string    { return string(KindURI) + ":" + uri }
func DNSID(name string) string   { return string(KindDNS) + ":" + strings.ToLower(name) }
func TokenID(name string) string { return string(KindToken) + ":" + name }

// ErrKindRequired is returned by CheckExplicitID for an id that does not
// name its kind.
var ErrKindRequired = errors.New("the id must name its kind")

// CheckExplicitID accepts a valid identity id that names its kind, as a
// new grant's id must.
func CheckExplicitID(id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	if _, _, explicit := ParseID(id); !explicit {
		return fmt.Errorf("%w: id: %w: uri:<certificate SAN URI>, dns:<certificate DNS name> or token:<name>", ErrInvalidGrant, ErrKindRequired)
	}
	return nil
}

func isAbsoluteURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != ""
}

func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '*') {
				return false
			}
		}
	}
	return true
}

// CheckID reports whether id is a valid identity id, naming the field.
func CheckID(id string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("%w: id: %v", ErrInvalidGrant, err)
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// HasService reports whether the grant lists service.
func (g *Grant) HasService(service string) bool { return slices.Contains(g.Services, service) }

// TokenPrefix starts every token NewToken makes, so that a leaked one is
// recognised by secret scanners.
const TokenPrefix = "slt_"

// Bounds on a token's time to live (NewTokenTTL).
const (
	MinTokenTTL = time.Minute
	MaxTokenTTL = 10 * 365 * 24 * time.Hour
)

// NewTokenTTL makes a bearer token like NewToken that expires ttl after
// its creation (to the second); ttl 0 makes one that never expires.
func NewTokenTTL(now time.Time, ttl time.Duration) (token string, stored Token, err error) {
	if ttl != 0 && (ttl < MinTokenTTL || ttl > MaxTokenTTL) {
		return "", Token{}, fmt.Errorf("%w: ttl: %v is outside [%v, %v] (0: never expires)", ErrInvalidGrant, ttl, MinTokenTTL, MaxTokenTTL)
	}
	token, stored, err = NewToken(now)
	if err == nil && ttl != 0 {
		stored.Expires = stored.Created.Add(ttl)
	}
	return token, stored, err
}

// NewToken makes a bearer token: TokenPrefix and 32 random bytes in
// base64url. It returns the token, to be shown once, and its stored form.
func NewToken(now time.Time) (token string, stored Token, err error) {
	var secret [32]byte
	var id [6]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Token{}, err
	}
	if _, err := rand.Read(id[:]); err != nil {
		return "", Token{}, err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	h := HashToken(token)
	return token, Token{ID: hex.EncodeToString(id[:]), SHA256: hex.EncodeToString(h[:]), Created: now.UTC().Truncate(time.Second)}, nil
}

// HashToken returns the SHA-256 of a token, the only form in which tokens
// are stored or compared. A fast hash is enough: tokens are 256 random
// bits, so there is no dictionary to try and a slow KDF would only cost
// every call its time (see the package doc).
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }
