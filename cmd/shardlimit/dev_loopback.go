package main

import "net"

// requireLoopback fails unless addr's host is a loopback address (or
// "localhost"), or any says another is fine (the flag named anyFlag).
func requireLoopback(flag, addr string, any bool, anyFlag string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("%s: %v", flag, err)
	}
	if any || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usageErrorf("%s: %q is not a loopback address: other machines could reach etcd, which holds every grant and rule; %s allows it", flag, addr, anyFlag)
}
