package tracing

// CollectorDown says whether the last connection attempt to p's collector
// failed.
func CollectorDown(p *Provider) bool { return p.dial.last() != nil }
