package main

import (
	"fmt"
	"os"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gatewayimage IN OUT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayimage:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(b, set); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	seen := map[string]bool{}
	for _, f := range set.File {
		seen[f.GetName()] = true
	}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		fdp := protodesc.ToFileDescriptorProto(fd)
		fdp.SourceCodeInfo = &descriptorpb.SourceCodeInfo{} // compiled in without comments
		set.File = append(set.File, fdp)                    // after its imports, as in an image
	}
	add(rlsv3.File_envoy_service_ratelimit_v3_rls_proto)
	if b, err = (proto.MarshalOptions{Deterministic: true}).Marshal(set); err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}
