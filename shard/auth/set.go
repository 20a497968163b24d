package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Identity is an authenticated caller: its id, role and services.
type Identity struct {
	// ID names the identity's kind: uri:..., dns:... or token:...
	// (CanonicalID).
	ID   string
	Role Role
	// services is the set of the service role's services.
	services map[string]struct{}
}

// Allows reports whether the identity may act for service: an operator
// for every service, a service identity for those of its grant, nobody
// else.
func (id *Identity) Allows(service string) bool {
	if id == nil {
		return false
	}
	switch id.Role {
	case RoleOperator, roleUnchecked:
		return true
	case RoleService:
		_, ok := id.services[service]
		return ok
	}
	return false
}

// roleUnchecked is the role of every caller of a server that runs without
// authentication (--insecure): it may do anything.
const roleUnchecked Role = "unchecked"

// Set is an immutable collection of grants, indexed by identity id (each
// id naming its kind, CanonicalID) and by token hash. Build one with
// NewSet; swap whole sets.
type Set struct {
	byID   map[string]*Identity
	byHash map[[sha256.Size]byte]tokenEntry
	grants []Grant
}

type tokenEntry struct {
	id      *Identity
	hash    [sha256.Size]byte
	expires time.Time
}

// NewSet indexes grants, which must be valid. Ids are read by CanonicalID,
// so that "spiffe://x" written before kinds and "uri:spiffe://x" are the
// same identity. Earlier grants win: a later grant of an identity already
// seen is skipped, and so is a token hash already seen (tokens are random,
// so that happens only when one is copied). The caller puts the grants
// that must not be overridden (a grants file) first.
func NewSet(grants ...[]Grant) *Set {
	s := &Set{byID: map[string]*Identity{}, byHash: map[[sha256.Size]byte]tokenEntry{}}
	for _, gs := range grants {
		for _, g := range gs {
			cid := CanonicalID(g.ID)
			if _, dup := s.byID[cid]; dup {
				continue
			}
			id := &Identity{ID: cid, Role: g.Role}
			if g.Role == RoleService {
				id.services = make(map[string]struct{}, len(g.Services))
				for _, svc := range g.Services {
					id.services[svc] = struct{}{}
				}
			}
			s.byID[cid] = id
			s.grants = append(s.grants, g)
			for _, t := range g.Tokens {
				var h [sha256.Size]byte
				if b, err := hex.DecodeString(t.SHA256); err == nil && len(b) == len(h) {
					copy(h[:], b)
					if _, dup := s.byHash[h]; !dup {
						s.byHash[h] = tokenEntry{id: id, hash: h, expires: t.Expires}
					}
				}
			}
		}
	}
	slices.SortFunc(s.grants, func(a, b Grant) int { return strings.Compare(a.ID, b.ID) })
	return s
}

// Len returns the number of identities.
func (s *Set) Len() int { return len(s.byID) }

// Grants returns the grants of the set, sorted by id. The caller must not
// change them.
func (s *Set) Grants() []Grant { return s.grants }

// Lookup returns the identity with id (read by CanonicalID), or nil.
func (s *Set) Lookup(id string) *Identity { return s.byID[CanonicalID(id)] }

// Certificate returns the identity of a verified client certificate with
// SAN URIs uris and DNS names dnsNames, or nil: the first URI that a URI
// grant names, else the first DNS name that a DNS grant names. A URI never
// matches a DNS or token grant, nor a DNS name a URI or token grant.
func (s *Set) Certificate(uris []*url.URL, dnsNames []string) *Identity {
	for _, u := range uris {
		if id := s.byID[URIID(u.String())]; id != nil {
			return id
		}
	}
	for _, name := range dnsNames {
		if id := s.byID[DNSID(name)]; id != nil {
			return id
		}
	}
	return nil
}

// ErrTokenExpired is returned by Token for a known token past its expiry.
var ErrTokenExpired = errors.New("the bearer token has expired")

// ErrTokenUnknown is returned by Token for a token no grant holds.
var ErrTokenUnknown = errors.New("the bearer token is not recognised")

// Token returns the identity that token authenticates at now and when
// the token expires (zero: never), or ErrTokenUnknown, or
// ErrTokenExpired. The token is hashed and the hash
// looked up: a lookup's timing can only tell a caller about the hash of
// its own guess, never about a stored token; the final comparison is
// constant time all the same.
func (s *Set) Token(token string, now time.Time) (*Identity, time.Time, error) {
	h := HashToken(token)
	e, ok := s.byHash[h]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], h[:]) != 1 {
		return nil, time.Time{}, ErrTokenUnknown
	}
	if !e.expires.IsZero() && !now.Before(e.expires) {
		return nil, time.Time{}, ErrTokenExpired
	}
	return e.id, e.expires, nil
}
