// Package creds holds the credentials a shardlimit component or client
// presents and trusts, as files: TLS configs that read their certificate,
// key and CA files again when they change (ServerTLS, ClientTLS), bearer
// tokens read from a file the same way (TokenFile, PerRPC), the client
// config file that ctl and the Go client find through $SHARDLIMIT_CONFIG
// (ClientConfig), and, for `shardlimit dev` and test clusters, a CA and the
// certificates it issues (NewCA, Local), and dev's etcd PKI apart from it
// (LocalEtcd: the server's, root's and one client certificate per
// component, whose common names are their etcd users).
//
// Rotation: a file in use is looked at (one stat) at most once a second, on
// the next handshake or call; a changed file is read and used from then on.
// A file that does not parse (half-written, or a key that does not match its
// certificate) leaves the last good one in use. Connections already open
// keep the certificate they were made with. Files are written whole and
// renamed into place (WriteFile), as Kubernetes does with secrets, so
// readers never see half of one. Files.OnLoad hears the expiry of what each
// load read (the certificate, and the earliest of the CA bundle), for the
// components' certificate expiry metric.
//
// The routers, shards, rebalance job, ctl, dev and router/client use it;
// it must never log or print a token, and never import a component.
package creds
