package frontend

import (
	"strconv"

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
func wellFormed(m protoreflect.Message) error {
	return checkMessage(m, "")
}

func checkMessage(m protoreflect.Message, path string) error {
	switch m.Descriptor().FullName() {
	case durationName:
		d := m.Interface().(*durationpb.Duration)
		if err := d.CheckValid(); err != nil {
			return invalid("%s is not a valid duration (%d s, %d ns): %s", fieldName(path), d.GetSeconds(), d.GetNanos(), trimProto(err))
		}
		return nil
	case timestampName:
		ts := m.Interface().(*timestamppb.Timestamp)
		if err := ts.CheckValid(); err != nil {
			return invalid("%s is not a valid timestamp (%d s, %d ns): %s", fieldName(path), ts.GetSeconds(), ts.GetNanos(), trimProto(err))
		}
		return nil
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		err = checkField(fd, v, join(path, string(fd.Name())))
		return err == nil
	})
	return err
}

func checkField(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch {
	case fd.IsList():
		list := v.List()
		if list.Len() > MaxRepeatedCount {
			return invalid("%s has %d entries, more than the limit of %d", path, list.Len(), MaxRepeatedCount)
		}
		for i := range list.Len() {
			if err := checkValue(fd, list.Get(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	case fd.IsMap():
		m := v.Map()
		if m.Len() > MaxRepeatedCount {
			return invalid("%s has %d entries, more than the limit of %d", path, m.Len(), MaxRepeatedCount)
		}
		var err error
		m.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			p := path + "[" + strconv.Quote(k.String()) + "]"
			if fd.MapKey().Kind() == protoreflect.StringKind && len(k.String()) > MaxStringLength {
				err = invalid("a key of %s is %d bytes long, more than the limit of %d", path, len(k.String()), MaxStringLength)
				return false
			}
			err = checkValue(fd.MapValue(), mv, p)
			return err == nil
		})
		return err
	}
	return checkValue(fd, v, path)
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v.Message(), path)
	case protoreflect.EnumKind:
		if fd.Enum().Values().ByNumber(v.Enum()) == nil {
			return invalid("%s: %d is not a %s", path, v.Enum(), fd.Enum().Name())
		}
	case protoreflect.StringKind:
		if n := len(v.String()); n > MaxStringLength {
			return invalid("%s is %d bytes long, more than the limit of %d", path, n, MaxStringLength)
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

func fieldName(path string) string {
	if path == "" {
		return "the request"
	}
	return path
}

func trimProto(err error) string {
	s := err.Error()
	const prefix = "proto: "
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
