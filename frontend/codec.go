package frontend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// gRPC answers a request its codec cannot decode with Internal, whatever the reason. A string
// field that is not valid UTF-8 is the client's mistake, not the server's, and deserves
// InvalidArgument naming the field, like every other malformed value.
//
// The codec therefore lets such a request through undecoded and remembers why, keyed by the
// message it was asked to fill; malformedInterceptor, which runs for every unary call, turns it
// into InvalidArgument before anything else sees the request. Any other decoding failure keeps
// gRPC's answer.

// malformedRequests maps a request message to the error that decoding it met.
var malformedRequests sync.Map

type requestCodec struct{ encoding.CodecV2 }

func newRequestCodec() requestCodec { return requestCodec{encoding.GetCodecV2(proto.Name)} }

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err != nil && strings.Contains(err.Error(), "invalid UTF-8") {
		if m, ok := v.(protoreflect.ProtoMessage); ok {
			if path := invalidUTF8Field(m.ProtoReflect().Descriptor(), data.Materialize(), ""); path != "" {
				err = fmt.Errorf("%s is not valid UTF-8", path)
			}
		}
		malformedRequests.Store(v, err)
		return nil
	}
	return err
}

// invalidUTF8Field returns the path of the first string field in b (an encoded desc) that is
// not valid UTF-8, "" if there is none or b does not parse.
func invalidUTF8Field(desc protoreflect.MessageDescriptor, b []byte, path string) string {
	index := map[protoreflect.FieldNumber]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		fd := desc.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		value, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		name := join(path, string(fd.Name()))
		if fd.IsList() {
			name += "[" + strconv.Itoa(index[num]) + "]"
			index[num]++
		}
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(value):
			return name
		case fd.IsMap():
			if p := invalidUTF8Field(fd.Message(), value, name); p != "" {
				return p
			}
		case fd.Kind() == protoreflect.MessageKind:
			if p := invalidUTF8Field(fd.Message(), value, name); p != "" {
				return p
			}
		}
	}
	return ""
}

// malformedInterceptor refuses a request whose decoding failed for a reason the client can fix.
func malformedInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err, ok := malformedRequests.LoadAndDelete(req); ok {
		return nil, serviceerror.NewInvalidArgument("malformed request: " + strings.TrimPrefix(err.(error).Error(), "proto: "))
	}
	return handler(ctx, req)
}

// malformedStreamInterceptor does the same for the messages a stream receives.
func malformedStreamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, malformedCheckingStream{ss})
}

type malformedCheckingStream struct{ grpc.ServerStream }

func (s malformedCheckingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err, ok := malformedRequests.LoadAndDelete(m); ok {
		return serviceerror.ToStatus(serviceerror.NewInvalidArgument("malformed request: " + strings.TrimPrefix(err.(error).Error(), "proto: "))).Err()
	}
	return nil
}
