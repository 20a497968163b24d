package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"slices"
	"strings"
)

// Identity is an authenticated caller: its id, role and services.
type Identity struct {
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

// Set is an immutable collection of grants, indexed by identity id and by
// token hash. Build one with NewSet; swap whole sets.
type Set struct {
	byID   map[string]*Identity
	byHash map[[sha256.Size]byte]tokenEntry
	grants []Grant
}

type tokenEntry struct {
	id   *Identity
	hash [sha256.Size]byte
}

// NewSet indexes grants, which must be valid. Earlier grants win: a later
// grant of an id already seen is skipped, and so is a token hash already
// seen (tokens are random, so that happens only when one is copied). The
// caller puts the grants that must not be overridden (a grants file)
// first.
func NewSet(grants ...[]Grant) *Set {
	s := &Set{byID: map[string]*Identity{}, byHash: map[[sha256.Size]byte]tokenEntry{}}
	for _, gs := range grants {
		for _, g := range gs {
			if _, dup := s.byID[g.ID]; dup {
				continue
			}
			id := &Identity{ID: g.ID, Role: g.Role}
			if g.Role == RoleService {
				id.services = make(map[string]struct{}, len(g.Services))
				for _, svc := range g.Services {
					id.services[svc] = struct{}{}
				}
			}
			s.byID[g.ID] = id
			s.grants = append(s.grants, g)
			for _, t := range g.Tokens {
				var h [sha256.Size]byte
				if b, err := hex.DecodeString(t.SHA256); err == nil && len(b) == len(h) {
					copy(h[:], b)
					if _, dup := s.byHash[h]; !dup {
						s.byHash[h] = tokenEntry{id: id, hash: h}
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

// Lookup returns the identity with id, or nil.
func (s *Set) Lookup(id string) *Identity { return s.byID[id] }

// Token returns the identity that token authenticates, or nil. The token
// is hashed and the hash looked up: a lookup's timing can only tell a
// caller about the hash of its own guess, never about a stored token; the
// final comparison is constant time all the same.
func (s *Set) Token(token string) *Identity {
	h := HashToken(token)
	e, ok := s.byHash[h]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], h[:]) != 1 {
		return nil
	}
	return e.id
}
