package chasmtest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// CheckShallowCopy fails t unless shallowCopy is the copy chasm.WithCopyOnWrite asks for: for
// every field of S, set alone, the copy has it; a nested message is shared, not copied; a list
// or a map is the copy's own, so that editing it leaves the source as it was. A field added to
// S and forgotten in the copy fails here.
func CheckShallowCopy[S proto.Message](t testing.TB, shallowCopy func(S) S) {
	t.Helper()
	var zero S
	fields := zero.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		src := zero.ProtoReflect().Type().New()
		src.Set(fd, sampleValue(src, fd))
		want := proto.Clone(src.Interface())
		cp := shallowCopy(src.Interface().(S)).ProtoReflect()
		if !proto.Equal(src.Interface(), cp.Interface()) {
			t.Errorf("%s: the copy lost field %s", fd.ContainingMessage().FullName(), fd.Name())
			continue
		}
		switch {
		case fd.IsList():
			cp.Get(fd).List().Set(0, sampleElement(cp.Get(fd).List().NewElement(), fd, 2))
		case fd.IsMap():
			cp.Get(fd).Map().Clear(sampleKey(fd.MapKey()).MapKey())
		case fd.Message() != nil:
			if cp.Get(fd).Message().Interface() != src.Get(fd).Message().Interface() {
				t.Errorf("%s: the copy copied nested message %s instead of sharing it", fd.ContainingMessage().FullName(), fd.Name())
			}
			continue
		default:
			continue
		}
		if !proto.Equal(want, src.Interface()) {
			t.Errorf("%s: editing the copy's %s changed the source: the container is shared", fd.ContainingMessage().FullName(), fd.Name())
		}
	}
	// Fields unknown to this build (written by a newer one) are kept.
	src := zero.ProtoReflect().Type().New()
	src.SetUnknown(protoreflect.RawFields{0xf8, 0x07, 1})
	if cp := shallowCopy(src.Interface().(S)); !proto.Equal(src.Interface(), cp) {
		t.Errorf("%s: the copy lost the fields this build does not know", src.Descriptor().FullName())
	}
}

// sampleValue is a value of fd other than its default, for the message m.
func sampleValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch {
	case fd.IsList():
		l := m.NewField(fd).List()
		l.Append(sampleElement(l.NewElement(), fd, 1))
		return protoreflect.ValueOfList(l)
	case fd.IsMap():
		mp := m.NewField(fd).Map()
		mp.Set(sampleKey(fd.MapKey()).MapKey(), sampleElement(mp.NewValue(), fd.MapValue(), 1))
		return protoreflect.ValueOfMap(mp)
	}
	return sampleElement(m.NewField(fd), fd, 1)
}

// sampleElement is a value of fd's kind numbered n (1 or 2); empty is a new value of the kind,
// used for messages.
func sampleElement(empty protoreflect.Value, fd protoreflect.FieldDescriptor, n int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(n == 1)
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		return protoreflect.ValueOfEnum(values.Get(min(n, values.Len()-1)).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(rune('a' + n)))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(n)})
	}
	// A message: a new one, set apart from another by its unknown fields, so that it is
	// present and two samples differ.
	msg := empty.Message()
	msg.SetUnknown(protoreflect.RawFields{0xf8, 0x07, byte(n)}) // field 127, varint n
	return protoreflect.ValueOfMessage(msg)
}

// sampleKey is a map key of fd's kind.
func sampleKey(fd protoreflect.FieldDescriptor) protoreflect.Value {
	return sampleElement(protoreflect.Value{}, fd, 1)
}
