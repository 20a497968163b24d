// Package request holds the pure steps of one Check: Validate the fields
// against their bounds, Resolve each check to the rules that apply (and the
// counter each rule uses), Group the resolved checks by the shard that owns
// their partition, choose the Refunds when a check's rules disagree, and
// Merge the rules' decisions into one answer per check. ByPolicy is the
// answer a rule's failure policy gives when its shard cannot.
//
// The router is the glue around these steps: it calls shards and etcd,
// they do not. Nothing here performs I/O, reads the clock or keeps state,
// so every step is table-tested without a cluster. It uses the API's
// message types but must never make a call, import etcd, or import the
// router package itself.
package request
