// Command example is a tiny HTTP service rate limited by shardlimit through
// the httpmw middleware. Against `make run` and its sample rules (service
// shop: /checkout 10 per minute per user, other endpoints 100 per minute):
//
//	go run ./router/client/example
//	curl -i -H 'X-User-ID: alice' http://127.0.0.1:8080/checkout
//
// It is an example, run by people trying shardlimit: it holds no logic of its
// own beyond wiring flags to the client's and the middleware's options, and
// must never grow any.
package main
