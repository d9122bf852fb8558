package frontend

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Bounds that hold for every field of every request; field-specific limits come on top.
const (
	// MaxRepeatedCount bounds any repeated or map field.
	MaxRepeatedCount = 10_000
	// MaxStringLength bounds any string field (identities, messages, stack traces).
	MaxStringLength = 1 << 20
)

var (
	durationName  = (&durationpb.Duration{}).ProtoReflect().Descriptor().FullName()
	timestampName = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()
)

// wellFormed checks every value in a request that the protobuf decoder accepts but vigil could
// only mishandle: a Duration whose seconds and nanos disagree in sign or that is out of range,
// a Timestamp outside years 1–9999, an enum number the API does not define, and strings and
// repeated fields beyond the bounds above. It names the first offending field by its path.
// (Strings that are not UTF-8 never get here: see codec.go.)
//
// Every heartbeat pays for it (BenchmarkWellFormedHeartbeat measures it), so it allocates next to nothing unless it finds something:
// the path is put together only on the way back from an offending field. (Range over the set
// fields is a little faster but allocates a closure per message.)
func wellFormed(m protoreflect.Message) error {
	if bad := checkMessage(m); bad != nil {
		return bad.toError()
	}
	return nil
}

// malformed is an offending value: what is wrong with it, and its path, innermost first.
type malformed struct {
	reason string
	path   []string
}

func (e *malformed) at(segment string) *malformed {
	e.path = append(e.path, segment)
	return e
}

func (e *malformed) toError() error {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		seg := e.path[i]
		if b.Len() > 0 && !strings.HasPrefix(seg, "[") {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	field := b.String()
	if field == "" {
		field = "the request"
	}
	return invalid("%s%s", field, e.reason)
}

func checkMessage(m protoreflect.Message) *malformed {
	switch m.Descriptor().FullName() {
	case durationName:
		d := m.Interface().(*durationpb.Duration)
		if err := d.CheckValid(); err != nil {
			return &malformed{reason: fmt.Sprintf(" is not a valid duration (%d s, %d ns): %s", d.GetSeconds(), d.GetNanos(), trimProto(err))}
		}
		return nil
	case timestampName:
		ts := m.Interface().(*timestamppb.Timestamp)
		if err := ts.CheckValid(); err != nil {
			return &malformed{reason: fmt.Sprintf(" is not a valid timestamp (%d s, %d ns): %s", ts.GetSeconds(), ts.GetNanos(), trimProto(err))}
		}
		return nil
	}
	for _, fd := range checkedFields(m.Descriptor()) {
		if !m.Has(fd) {
			continue
		}
		if bad := checkField(fd, m.Get(fd)); bad != nil {
			return bad.at(string(fd.Name()))
		}
	}
	return nil
}

// checkedByType holds, per message type, the fields that can hold something wellFormed
// checks (checkedFields), computed once per type.
var checkedByType sync.Map // protoreflect.MessageDescriptor → []protoreflect.FieldDescriptor

// checkedFields returns the fields of a message type that can hold a value wellFormed checks:
// repeated and map fields (their count), strings, enums, and messages that can hold one in
// turn. Numbers, booleans and bytes cannot be malformed once decoded, and most of an SDK
// heartbeat's fields are numbers: skipping them is most of what the check would cost.
func checkedFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if v, ok := checkedByType.Load(md); ok {
		return v.([]protoreflect.FieldDescriptor)
	}
	fields := checkedFieldsOf(md, map[protoreflect.MessageDescriptor]bool{})
	checkedByType.Store(md, fields)
	return fields
}

// checkedFieldsOf computes checkedFields; visiting holds the message types being computed,
// which a recursive type meets again and counts as checked (the safe answer).
func checkedFieldsOf(md protoreflect.MessageDescriptor, visiting map[protoreflect.MessageDescriptor]bool) []protoreflect.FieldDescriptor {
	visiting[md] = true
	defer delete(visiting, md)
	var out []protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsList() || fd.IsMap() || valueChecked(fd, visiting) {
			out = append(out, fd)
		}
	}
	return out
}

// valueChecked says whether a single value of fd can be malformed.
func valueChecked(fd protoreflect.FieldDescriptor, visiting map[protoreflect.MessageDescriptor]bool) bool {
	switch fd.Kind() {
	case protoreflect.EnumKind, protoreflect.StringKind:
		return true
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		switch name := md.FullName(); {
		case name == durationName || name == timestampName || visiting[md]:
			return true
		}
		if v, ok := checkedByType.Load(md); ok {
			return len(v.([]protoreflect.FieldDescriptor)) > 0
		}
		return len(checkedFieldsOf(md, visiting)) > 0
	}
	return false
}

func checkField(fd protoreflect.FieldDescriptor, v protoreflect.Value) *malformed {
	switch {
	case fd.IsList():
		list := v.List()
		if list.Len() > MaxRepeatedCount {
			return &malformed{reason: fmt.Sprintf(" has %d entries, more than the limit of %d", list.Len(), MaxRepeatedCount)}
		}
		for i := range list.Len() {
			if bad := checkValue(fd, list.Get(i)); bad != nil {
				return bad.at("[" + strconv.Itoa(i) + "]")
			}
		}
		return nil
	case fd.IsMap():
		m := v.Map()
		if m.Len() > MaxRepeatedCount {
			return &malformed{reason: fmt.Sprintf(" has %d entries, more than the limit of %d", m.Len(), MaxRepeatedCount)}
		}
		var bad *malformed
		m.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			if fd.MapKey().Kind() == protoreflect.StringKind && len(k.String()) > MaxStringLength {
				bad = &malformed{reason: fmt.Sprintf(": a key is %d bytes long, more than the limit of %d", len(k.String()), MaxStringLength)}
				return false
			}
			if bad = checkValue(fd.MapValue(), mv); bad != nil {
				bad.at("[" + strconv.Quote(k.String()) + "]")
				return false
			}
			return true
		})
		return bad
	}
	return checkValue(fd, v)
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) *malformed {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v.Message())
	case protoreflect.EnumKind:
		if fd.Enum().Values().ByNumber(v.Enum()) == nil {
			return &malformed{reason: fmt.Sprintf(": %d is not a %s", v.Enum(), fd.Enum().Name())}
		}
	case protoreflect.StringKind:
		if n := len(v.String()); n > MaxStringLength {
			return &malformed{reason: fmt.Sprintf(" is %d bytes long, more than the limit of %d", n, MaxStringLength)}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func trimProto(err error) string {
	return strings.TrimPrefix(err.Error(), "proto: ")
}
