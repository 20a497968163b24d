package httpmw_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/client/httpmw"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// Rate limit an HTTP service by the X-User-ID header, against a real
// cluster whose rule allows 10 checkouts a minute per user. Allowed
// responses carry the RateLimit fields, complete without configuration;
// the eleventh request gets 429 with quota-exceeded problem details.
func ExampleNew() {
	rs, err := rules.Parse("example.yaml", []byte(`
rules:
  - {service: shop, endpoint: /checkout, name: checkout, limit: 10, period: 1m}
`))
	if err != nil {
		panic(err)
	}
	tb, done := clustertest.ExampleTB("ExampleNew")
	defer done()
	cluster := clustertest.New(tb, httpmw.EtcdEndpoint(), clustertest.Options{Shards: 1, Rules: rs})
	c, err := client.New(client.Options{
		TLS: cluster.TLS(creds.OperatorID), Routers: []string{cluster.Routers[0].Addr()}, Timeout: 30 * time.Second, // generous: examples run on a loaded machine
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	limit := httpmw.New(c, httpmw.Options{Service: "shop", Key: httpmw.KeyUserHeader})
	srv := httptest.NewServer(limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "checked out")
	})))
	defer srv.Close()

	for i := range 11 {
		req, _ := http.NewRequest("POST", srv.URL+"/checkout", nil)
		req.Header.Set("X-User-ID", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch i {
		case 0:
			fmt.Println(resp.Status, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"))
			fmt.Print(string(body))
		case 10:
			fmt.Println(resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("RateLimit-Policy"))
			fmt.Print(string(body[:len(`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"`)]), "...\n")
		}
	}
	// Output:
	// 200 OK "checkout";q=10;w=60 "checkout";r=9;t=6
	// checked out
	// 429 Too Many Requests application/problem+json "checkout";q=10;w=60
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"...
}
