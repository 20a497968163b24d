// Package auth decides who may call what on every shardlimit gRPC server:
// identities, their roles and services (grants), and the interceptors that
// enforce them, in one place per server, for unary calls and streams alike.
//
// # Identities
//
// A caller is identified by a bearer token ("authorization: Bearer <token>"
// metadata), else by its client certificate, verified by the TLS handshake.
// Identities come in three kinds, and a grant's id names its kind (Kind,
// ParseID): uri:<SAN URI>, dns:<SAN DNS name> and token:<name>. A
// certificate's SAN URIs are looked up among uri: grants first, then its
// DNS names among dns: grants (without case), the first match winning
// (Set.Certificate); a DNS name never matches a uri: or token: grant, and no
// certificate matches a token: grant. An id written without a kind (before
// kinds existed) is read as uri: if it parses as an absolute URI, else as
// token:; dns: grants are explicit only. A call that carries a token is the
// token's caller whatever its certificate, and an unknown or expired token
// (Token.Expires, judged by Options.Now) is refused even with a good
// certificate. Tokens are for callers that cannot hold a certificate of
// their own, such as an Envoy that calls for several services.
//
// Tokens are 256 random bits (NewToken), shown once when made and stored
// only as their SHA-256. A slow password hash (bcrypt, scrypt, argon2) is
// for secrets a person chooses, which an attacker holding the hashes can
// guess from a dictionary; nobody can guess 256 random bits, so a fast hash
// loses nothing and costs each call a quarter of a microsecond instead of
// milliseconds. A presented token is hashed and its hash looked up; the
// lookup's timing can only tell a caller about the hash of its own guess,
// and the final comparison is constant time (crypto/subtle).
//
// # Roles
//
//   - service: check, and read limited users and hot keys of, only the
//     services of its grant;
//   - operator: manage rules and grants, rebalance, reset counters, roll the
//     shard map back, and everything a service may, for every service;
//   - internal: routers and the rebalance job; the only role that may call
//     the shard API.
//
// A Grant gives one identity its role (and, for service, its services).
// Grants are stored in etcd at grants/<identity-id> (package grantstore),
// followed by every router and shard, and given in a grants file
// (--grants-file) for the identities a cluster needs before anything is
// stored: the internal ones and a first operator. The file's grants win
// over stored ones of the same identity, so a stored grant cannot take a
// router's role away, and only the file grants the internal role:
// grantstore neither stores nor reads one from etcd. Grants are validated
// like rules, each error naming its field.
//
// # The method table
//
// methods.go is the one table of who may call each gRPC method: by full
// method, else by gRPC service (the whole shard API is internal-only, so a
// method added to it is too). A method in neither is refused to everyone.
// Health's unary Check is open to anyone, credentials or not: it says
// SERVING and nothing else, and probes carry no credentials. Health's Watch
// and List, and reflection (for grpcurl), are open to every known caller,
// never to an unknown one.
//
// # What an anonymous caller reaches
//
// The review of everything a caller without credentials can make a server
// do (issue 23), on every server (router, shard, rebalance job):
//
//   - A TCP connection, counted from accept by package rpc's connection
//     bound: at most --max-connections in all and --max-connections-per-peer
//     from one IP, each closed unless its TLS handshake and HTTP/2 preface
//     are done within --handshake-timeout (5s; gRPC's own is 120s), and
//     then unless it authenticates within --auth-timeout (10s): a client
//     certificate that a grant names authenticates it at once
//     (Authorizer.ConnAuthenticated), else the first call whose caller the
//     interceptor identifies marks it (package connauth); calls open to
//     anyone never do, so Health Checks cannot hold a connection. The
//     router's HTTP API has a bound of its own (--http-max-connections),
//     and the same --auth-timeout, from accept.
//   - A TLS handshake: the server's certificate, and verification of a
//     client certificate if one is sent (VerifyClientCertIfGiven).
//   - Streams on an HTTP/2 connection: at most --max-concurrent-streams (1000)
//     per connection, so at most 1000 × 100 = 100,000 calls in flight from
//     one IP with the defaults. Every such call is refused by the
//     interceptor before its handler runs (Unauthenticated, one counter
//     increment and at most one log line per 10 s), except:
//   - /grpc.health.v1.Health/Check, unary: a map lookup and a small answer.
//     Watch (a goroutine and a stream held until the caller leaves: 50,000
//     anonymous Watch streams took a router from 76 MB to 640 MB) and List
//     are refused to it. A known caller's Watch streams count against the
//     same per-connection stream bound.
//   - On the router's HTTP API, a request body of at most --http-max-body is
//     read and decoded before the authorizer refuses the call, within its
//     30 s read timeout.
//
// Nothing else (the public API, Envoy's API, admin, the shard API,
// rebalancing, reflection) runs a handler for it.
//
// An interceptor cannot see which service a request names. For the methods
// the table opens to the service role (the public API, Envoy's API, limited
// users, hot keys), it puts the Caller in the context and the handler calls
// FromContext(ctx).MayUse(service) for every service the request names:
// one refused service refuses the whole request, before anything is
// counted. A handler with no Caller in its context (no Authorizer in front)
// may use nothing.
//
// # Refusals
//
// Missing credentials, or a token or certificate that no grant names, get
// Unauthenticated; a known caller outside its role or its services gets
// PermissionDenied. No message names a service or echoes a credential. Each
// refusal is counted in shardlimit_<component>_auth_refusals_total{api,
// reason} (api: the gRPC service, or "unknown"; reason: no_credentials,
// unknown_credentials, role, service, method) and logged at most once per
// reason per 10 s, with the count of lines left out. An expired token is
// unknown_credentials, its message saying it expired.
//
// shardlimit_<component>_grants_last_sync_timestamp_seconds is when the
// grants in force last matched etcd (Authorizer.GrantsSynced, called by
// grantstore.Follow).
//
// Package auth is pure but for its metrics and logs: it reads no file and
// talks to no etcd (grantstore does), and it must never log, count or
// return a token.
package auth
