package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// outputFormats are the values of -o.
var outputFormats = []string{"text", "json", "yaml"}

const outputUsage = "output format: text, json or yaml (json and yaml: snake_case keys, numbers as numbers, sorted keys)"

// checkOutput rejects an output format that is not one of outputFormats.
func checkOutput(format string) error {
	if !slices.Contains(outputFormats, format) {
		return usageErrorf("--output: %q is not one of %s", format, strings.Join(outputFormats, ", "))
	}
	return nil
}

// plural counts n of a noun that takes an s for more than one: "1 rule",
// "4 rules", "0 rules". ctl's text output counts with it.
func plural[N ~int | ~int32 | ~int64 | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printOutput writes v as JSON or YAML when format asks for it, else calls
// text. JSON and YAML hold the same stable view of v (see stableView).
func printOutput(w io.Writer, format string, v any, text func() error) error {
	if format == "text" {
		return text()
	}
	view, err := stableView(v)
	if err != nil {
		return err
	}
	return encodeView(w, format, view)
}

// encodeView writes a stable view as indented JSON or as YAML; both sort
// the keys of maps.
func encodeView(w io.Writer, format string, view any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(view)
	case "yaml":
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(view); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
		_, err := w.Write(b.Bytes())
		return err
	}
	return checkOutput(format)
}

// stableView turns v into maps, slices, strings, bools, int64, uint64 and
// float64, which encoding/json and YAML print the same way every time, with
// one key casing (snake_case) and 64-bit integers as numbers.
//
// A proto message becomes its fields by their proto names, every field
// present (an unset message as null, except in a oneof), enums by name,
// durations as Go durations ("1.5s") and timestamps in RFC 3339. protojson
// is not used: it writes 64-bit integers as strings and varies its spacing
// on purpose. Anything else is taken through encoding/json, so its json
// tags name the keys; a map value may itself be a proto message.
func stableView(v any) (any, error) {
	switch v := v.(type) {
	case proto.Message:
		return protoView(v.ProtoReflect()), nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			view, err := stableView(x)
			if err != nil {
				return nil, err
			}
			out[k] = view
		}
		return out, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var view any
	if err := dec.Decode(&view); err != nil {
		return nil, err
	}
	return numbers(view), nil
}

// numbers replaces json.Number with int64, uint64 or float64.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(v.String(), 10, 64); err == nil {
			return u
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

func protoView(m protoreflect.Message) any {
	if !m.IsValid() {
		return nil
	}
	switch x := m.Interface().(type) {
	case *durationpb.Duration:
		return x.AsDuration().String()
	case *timestamppb.Timestamp:
		return x.AsTime().UTC().Format(time.RFC3339Nano)
	}
	out := map[string]any{}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		v := m.Get(fd)
		switch {
		case fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() && !m.Has(fd):
			continue
		case fd.IsList():
			l := v.List()
			items := make([]any, l.Len())
			for j := range items {
				items[j] = protoValue(fd, l.Get(j))
			}
			out[name] = items
		case fd.IsMap():
			mm := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, x protoreflect.Value) bool {
				mm[k.String()] = protoValue(fd.MapValue(), x)
				return true
			})
			out[name] = mm
		case fd.Message() != nil && !m.Has(fd):
			out[name] = nil
		default:
			out[name] = protoValue(fd, v)
		}
	}
	return out
}

// protoValue returns one value of a field (an element of a list field).
func protoValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint()
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(f) // "NaN", "+Inf": JSON has no number for them
		}
		return f
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		if b := v.Bytes(); utf8.Valid(b) {
			return string(b)
		}
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int64(v.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoView(v.Message())
	}
	return v.Interface()
}
