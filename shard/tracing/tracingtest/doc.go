// Package tracingtest is an OTLP/gRPC trace collector for tests: Serve
// listens on 127.0.0.1:0 (with TLS when given), receives the spans that
// exporters send, and Spans returns them. It proves that a component's
// --otlp-* flags export real spans over a real connection.
//
// Only tests import it. It keeps every span it receives, so it must never
// serve outside a test.
package tracingtest
