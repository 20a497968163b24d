#!/usr/bin/env bash
# Makes a test PKI for the manifests in this directory and prints the
# kubectl commands that store it as the secrets they mount. For trying
# shardlimit out; in production, issue the same certificates from your own
# CA (cert-manager Certificates with these DNS names work as they are).
#
#   deploy/k8s/gen-certs.sh [NAMESPACE [OUTDIR]]    # default: shardlimit, ./shardlimit-certs
#
# Two CAs: one for shardlimit's own hops (callers → routers → shards,
# routers → rebalance leader), one for etcd, so that a component
# certificate is no etcd credential and the other way round.
#
# One certificate per component and caller. Each names its identity in a
# SAN URI, which grants give a role (base/grants.yaml: the router and the
# rebalance job internal, the operator operator); the DNS names are what
# callers verify. The shard's certificate is granted nothing: shards call
# nobody. Envoy's is a service identity: grant it its domains with
# `shardlimit ctl grants grant --id uri:spiffe://shardlimit/envoy --role service --service DOMAIN`.
set -euo pipefail
ns=${1:-shardlimit}
out=${2:-./shardlimit-certs}
days=${DAYS:-365}
mkdir -p "$out"
cd "$out"

ca() { # name subject
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
		-subj "/CN=$2" -keyout "$1-ca.key" -out "$1-ca.crt" 2>/dev/null
}
cert() { # name ca cn usage sans
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$3" \
		-keyout "$1.key" -out "$1.csr" 2>/dev/null
	printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=%s\nsubjectAltName=%s\n' "$4" "$5" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA "$2-ca.crt" -CAkey "$2-ca.key" -CAcreateserial -days "$days" \
		-extfile "$1.ext" -out "$1.crt" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}

ca shardlimit "shardlimit CA"
ca etcd "shardlimit etcd CA"

# The components: server and client certificate in one. Routers: the
# Services' names. Shards: --advertise=<pod>.shardlimit-shard.<ns>.svc.
# Every component also holds shardlimit.internal, the name internal hops
# verify (--tls-server-name).
cert router shardlimit shardlimit-router serverAuth,clientAuth \
	"URI:spiffe://shardlimit/router,DNS:shardlimit-router,DNS:shardlimit-router.$ns,DNS:shardlimit-router.$ns.svc,DNS:shardlimit-router-headless.$ns.svc,DNS:shardlimit.internal,DNS:localhost,IP:127.0.0.1"
cert shard shardlimit shardlimit-shard serverAuth,clientAuth \
	"URI:spiffe://shardlimit/shard,DNS:*.shardlimit-shard.$ns.svc,DNS:shardlimit.internal"
cert rebalance shardlimit shardlimit-rebalance serverAuth,clientAuth \
	"URI:spiffe://shardlimit/rebalance,DNS:shardlimit-rebalance.$ns.svc,DNS:shardlimit.internal"
# Callers: the operator (ctl) and Envoy.
cert operator shardlimit shardlimit-operator clientAuth "URI:spiffe://shardlimit/operator"
cert envoy shardlimit shardlimit-envoy clientAuth "URI:spiffe://shardlimit/envoy"
# etcd members, as clients (short names, the shardlimit-etcd ConfigMap) and
# peers (full names, --initial-cluster) call them. Named one by one: a
# wildcard over the two-label short names is refused by some TLS stacks.
etcd_sans="DNS:localhost,IP:127.0.0.1"
for i in 0 1 2; do
	for suffix in "" ".$ns" ".$ns.svc" ".$ns.svc.cluster.local"; do
		etcd_sans+=",DNS:shardlimit-etcd-$i.shardlimit-etcd$suffix"
	done
done
cert etcd-server etcd shardlimit-etcd serverAuth,clientAuth "$etcd_sans"
cert etcd-peer etcd shardlimit-etcd-peer serverAuth,clientAuth "$etcd_sans"
# etcd clients: one per component, and root for the shardlimit-etcd-auth
# Job. etcd (--client-cert-auth, authentication on) takes the common name
# as the user: each component's role writes only its own keys.
for c in router shard rebalance; do
	cert "etcd-$c" etcd "shardlimit-$c" clientAuth "DNS:shardlimit-etcd-$c"
done
cert etcd-root etcd root clientAuth "DNS:shardlimit-etcd-root"

secret() { # name cert key ca
	echo "kubectl -n $ns create secret generic $1 --from-file=tls.crt=$out/$2.crt --from-file=tls.key=$out/$2.key --from-file=ca.crt=$out/$3-ca.crt"
}
echo "# certificates in $out; store them with:"
echo "kubectl create namespace $ns --dry-run=client -o yaml | kubectl apply -f -"
for c in router shard rebalance operator envoy; do
	secret "shardlimit-$c-tls" "$c" shardlimit
done
for c in router shard rebalance root; do
	secret "shardlimit-etcd-$c-tls" "etcd-$c" etcd
done
secret shardlimit-etcd-server-tls etcd-server etcd
secret shardlimit-etcd-peer-tls etcd-peer etcd
